package ratelimit

import (
	"testing"
	"time"

	"github.com/postern/postern/internal/fakeclock"
)

func TestAllow(t *testing.T) {
	type step struct {
		advance time.Duration
		want    bool
	}
	tests := []struct {
		name  string
		rate  float64
		burst int
		steps []step
	}{
		{"burst then refused", 1, 3, []step{{0, true}, {0, true}, {0, true}, {0, false}}},
		{"refills at the rate", 2, 1, []step{{0, true}, {0, false}, {250 * time.Millisecond, false}, {250 * time.Millisecond, true}, {0, false}}},
		{"refill stops at the burst", 10, 2, []step{{0, true}, {0, true}, {time.Hour, true}, {0, true}, {0, false}}},
		{"negative rate is no limit", -1, 1, []step{{0, true}, {0, true}, {0, true}, {0, true}}},
		{"zero rate: the burst only", 0, 2, []step{{0, true}, {0, true}, {time.Hour, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeclock.New()
			l := New(tt.rate, tt.burst, 0, clk.Now)
			for i, st := range tt.steps {
				clk.Advance(st.advance)
				got, retry := l.Allow("k")
				if got != st.want {
					t.Fatalf("step %d: Allow = %v; want %v", i, got, st.want)
				}
				if !got && retry <= 0 {
					t.Errorf("step %d: refused with retry %v; want a positive wait", i, retry)
				}
			}
		})
	}
}

func TestRetryIsTheRefillTime(t *testing.T) {
	clk := fakeclock.New()
	l := New(1, 1, 0, clk.Now)
	l.Allow("a")
	if ok, retry := l.Allow("a"); ok || retry != time.Second {
		t.Errorf("second take at 1/s: %v, retry %v; want refused, retry 1s", ok, retry)
	}
	clk.Advance(400 * time.Millisecond)
	if ok, retry := l.Peek("a"); ok || retry != 600*time.Millisecond {
		t.Errorf("peek 0.4s later: %v, retry %v; want refused, retry 600ms", ok, retry)
	}
}

func TestKeysAreSeparate(t *testing.T) {
	clk := fakeclock.New()
	l := New(1, 1, 0, clk.Now)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("a first: refused")
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Error("b first: refused; want its own bucket")
	}
}

func TestChargeAndReset(t *testing.T) {
	clk := fakeclock.New()
	l := New(1, 3, 0, clk.Now)
	for range 3 {
		l.Allow("a")
	}
	// Charge goes below zero: failures counted after the fact all count.
	l.Charge("a")
	l.Charge("a")
	if ok, wait := l.Peek("a"); ok || wait != 3*time.Second {
		t.Errorf("after two charges on an empty bucket: %v, wait %v; want refused for 3s", ok, wait)
	}
	l.Reset("a")
	if ok, _ := l.Peek("a"); !ok {
		t.Error("after Reset: refused; want a full bucket")
	}
}

// TestBoundedKeys: with MaxKeys active buckets a new key is refused until
// one of them has refilled.
func TestBoundedKeys(t *testing.T) {
	clk := fakeclock.New()
	l := New(1, 1, 2, clk.Now)
	l.Allow("x")
	l.Allow("y")
	if ok, _ := l.Allow("z"); ok {
		t.Error("third key in a full table of active buckets: allowed; want refused (fail closed)")
	}
	clk.Advance(2 * time.Second)
	if ok, _ := l.Allow("z"); !ok {
		t.Error("third key after the others refilled: refused; want allowed")
	}
}
