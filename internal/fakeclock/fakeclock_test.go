package fakeclock

import (
	"testing"
	"time"
)

func TestAdvance(t *testing.T) {
	c := New()
	start := c.Now()
	c.Advance(90 * time.Second)
	if got := c.Now().Sub(start); got != 90*time.Second {
		t.Errorf("after Advance(90s) the clock moved %v; want 90s", got)
	}
}
