package main

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/internal/fakeclock"
)

// fakeDeleter records the cutoffs a sweep asks for.
type fakeDeleter struct{ cutoffs []time.Time }

func (f *fakeDeleter) DeleteRecordingsBefore(_ context.Context, cutoff time.Time) (int64, error) {
	f.cutoffs = append(f.cutoffs, cutoff)
	return 1, nil
}

// TestRecordingSweepCutoff: the sweep deletes what started more than the
// retention before now, as the (fake) clock tells it; the interval is an
// hour, or the retention if shorter, but at least a minute.
func TestRecordingSweepCutoff(t *testing.T) {
	clock := fakeclock.New()
	cases := []struct {
		retention, interval time.Duration
	}{{30 * 24 * time.Hour, time.Hour}, {10 * time.Minute, 10 * time.Minute}, {time.Millisecond, time.Minute}}
	for _, tc := range cases {
		d := &fakeDeleter{}
		p := newRecordingSweeper(d, zerolog.Nop(), tc.retention)
		p.now = clock.Now
		if p.interval != tc.interval {
			t.Errorf("retention %v: interval %v; want %v", tc.retention, p.interval, tc.interval)
		}
		clock.Advance(time.Hour)
		if n := p.sweep(context.Background()); n != 1 {
			t.Errorf("sweep: got %d; want the store's 1", n)
		}
		if want := clock.Now().Add(-tc.retention); len(d.cutoffs) != 1 || !d.cutoffs[0].Equal(want) {
			t.Errorf("retention %v: cutoffs %v; want [%v]", tc.retention, d.cutoffs, want)
		}
	}
}
