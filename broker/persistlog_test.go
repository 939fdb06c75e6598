package broker

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"
)

// A periodic persist that keeps failing (a full disk fails it every
// OffsetPersistPeriod until space frees) logs one ERROR when it starts
// and one line when it succeeds again, not an ERROR every period.
func TestBrokerPersistFailureLoggedOncePerEpisode(t *testing.T) {
	var buf bytes.Buffer
	p := persistFailure{log: slog.New(slog.NewTextHandler(&buf, nil)), what: "persist delay offsets"}
	enospc := errors.Join(errors.New("broker: persist delayOffset.json"), syscall.ENOSPC)
	p.report(nil)
	for i := 0; i < 5; i++ {
		p.report(enospc)
	}
	p.report(nil)
	p.report(nil)
	p.report(enospc)
	out := buf.String()
	if n := strings.Count(out, "level=ERROR"); n != 2 {
		t.Fatalf("%d ERROR lines for two failing episodes:\n%s", n, out)
	}
	if n := strings.Count(out, "succeeded again"); n != 1 {
		t.Fatalf("%d recovery lines for one recovery:\n%s", n, out)
	}
	if !strings.Contains(out, "no space left on device") || !strings.Contains(out, "persist delay offsets failed") {
		t.Fatalf("the error line does not say what and why:\n%s", out)
	}
}
