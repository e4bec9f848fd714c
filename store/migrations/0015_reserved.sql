-- 0015: reserved. Another branch of issue 24 adds the real step 0015; this
-- placeholder only keeps the numbering contiguous on the branch that adds
-- 0016 (audit sinks) and is dropped when the branches are merged.
SELECT 1;
