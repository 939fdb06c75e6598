package main

import (
	"testing"
	"time"
)

// mqadmin's resetOffsetByTime -s takes yyyy-MM-dd#HH:mm:ss:SSS in local
// time, any millisecond (not only :000), and a malformed one is refused.
func TestCmdParseTimeMqadminLayout(t *testing.T) {
	for s, want := range map[string]time.Time{
		"2026-01-02#15:04:05:678": time.Date(2026, 1, 2, 15, 4, 5, 678e6, time.Local),
		"2026-01-02#03:04:05:000": time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local),
		"2026-12-31#23:59:59:001": time.Date(2026, 12, 31, 23, 59, 59, 1e6, time.Local),
	} {
		got, err := parseTime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"2026-01-02#15:04:05", "2026-01-02#15:04:05:6789", "2026-01-02 15:04:05:678", "2026-01-02#15:04:05.678"} {
		if got, err := parseTime(s); err == nil {
			t.Errorf("parseTime(%q) = %v, want an error", s, got)
		}
	}
}

// A negative duration ago is a time in the future: taken as given it
// would move a group past everything stored (as "now" does) when "1h"
// was meant. It is refused, and so are negative unix milliseconds.
func TestCmdParseTimeRefusesNegative(t *testing.T) {
	for _, s := range []string{"-1h", "-30m", "-5", "-1"} {
		if got, err := parseTime(s); err == nil {
			t.Errorf("parseTime(%q) = %v, want an error", s, got)
		}
	}
	before := time.Now()
	got, err := parseTime("1h")
	if err != nil || got.After(before.Add(-time.Hour+time.Minute)) || got.Before(before.Add(-time.Hour-time.Minute)) {
		t.Errorf("parseTime(\"1h\") = %v, %v; want about %v", got, err, before.Add(-time.Hour))
	}
	if got, err := parseTime("0"); err != nil || got.UnixMilli() != 0 {
		t.Errorf("parseTime(\"0\") = %v, %v; want the epoch", got, err)
	}
}
