package bridge

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// A flood of bad MQTT peers (CONNECTs with a wrong password, CONNECTs of
// an unknown protocol level, garbage instead of a packet) is refused one
// connection at a time, every refusal counted, while the bridge's log
// stays bounded: at most one line per reason per interval (issue #16: a
// connection flood wrote 23.6 MB of log in five minutes).
func TestBridgeBadPeerFloodLogsBounded(t *testing.T) {
	// A credentials line of 1,000 PBKDF2 iterations: the flood's wrong
	// passwords cost the server milliseconds each, not most of the test's
	// time.
	creds := mqtttest.CredentialsFile(t, "alice", "s3cret")
	logs := &testutil.LogBuffer{}
	c := startCluster(t)
	b := startBridge(t, c, func(mo *mqtt.Options, _ *Options) {
		mo.CredentialsFile = creds
		mo.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	before := strings.Count(logs.String(), "\n")
	const each, passwords = 150, 20
	connect, err := packets.AppendPacket(nil, &packets.Connect{ClientID: "flood", CleanStart: true,
		UsernameFlag: true, Username: "alice", PasswordFlag: true, Password: []byte("wrong")}, packets.Version311)
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{
		connect, // a wrong password: CONNACK "not authorized", then closed
		{0x10, 12, 0, 4, 'M', 'Q', 'T', 'T', 9, 2, 0, 60, 0, 0}, // protocol level 9
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),             // not MQTT at all
	}
	// Each peer sends its bytes and reads until the server closes; many
	// at a time, as a flood does, except wrong passwords: the server checks
	// a password at a bounded rate (the hash is slow by design), so those
	// come one after another.
	peer := func(i int) error {
		nc, err := net.Dial("tcp", addrOf(b))
		if err != nil {
			return err
		}
		defer nc.Close()
		if _, err := nc.Write(bad[i%3]); err != nil {
			return err
		}
		_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, nc); err != nil && !strings.Contains(err.Error(), "reset") {
			return fmt.Errorf("peer %d not closed: %w", i, err)
		}
		return nil
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 3*each)
	sem := make(chan struct{}, 32)
	for i := range 3 * each {
		if i%3 == 0 {
			if i/3 < passwords {
				errs <- peer(i)
			}
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs <- peer(i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// One line per reason per interval: as many intervals as the flood
	// took began, plus one for a line written just after the last peer saw
	// its connection close.
	allowed := int(time.Since(start)/ratelog.DefaultInterval) + 2
	if got := b.Server().Stats().AuthFailures.Load(); got != passwords {
		t.Fatalf("AuthFailures = %d, want %d", got, passwords)
	}
	out := logs.String()
	lines := strings.Split(out, "\n")[before:]
	perReason := map[string]int{}
	reasonRE := regexp.MustCompile(`reason="?([^"=]+?)"? code=`)
	for _, l := range lines {
		if !strings.Contains(l, "client disconnected") {
			continue
		}
		r := "(none)"
		if m := reasonRE.FindStringSubmatch(l); m != nil {
			r = m[1]
		}
		perReason[r]++
	}
	total := 0
	for r, n := range perReason {
		if n > allowed {
			t.Errorf("%d lines for reason %q after %d refused connections (at most %d)", n, r, 2*each+passwords, allowed)
		}
		total += n
	}
	for _, r := range []string{"bad user name or password", "unsupported protocol version", "malformed packet"} {
		if perReason[r] == 0 {
			t.Errorf("no line for reason %q: %v\n%s", r, perReason, out)
		}
	}
	if n := len(lines); n > total+allowed {
		t.Fatalf("%d log lines for %d refused connections:\n%s", n, 2*each+passwords, out)
	}
	t.Logf("%d refused connections, %d log lines (%v)", 2*each+passwords, len(lines), perReason)
}
