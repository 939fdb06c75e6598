package main

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/registry"
)

// TestCmdBinaryBrokerRegistersWithRestartedRegistry: a registry that dies
// and starts again on its address gets the broker's registration within
// seconds, not at the broker's next register_interval (here 60 s, the
// most allowed): the broker registers again once its connection to the
// registry closes, retrying until the registry answers. It used to leave
// the restarted registry without the broker, and every route lookup
// there answered TOPIC_NOT_EXIST, until the interval ran out.
func TestCmdBinaryBrokerRegistersWithRestartedRegistry(t *testing.T) {
	startReg := func(addr string) *registry.Server {
		t.Helper()
		var r *registry.Server
		// The port may take a moment to be free again after Close.
		testutil.Eventually(t, 10*time.Second, func() error {
			var err error
			if r, err = registry.New(registry.Options{Addr: addr}); err != nil {
				return err
			}
			if err = r.Start(context.Background()); err != nil {
				r.Close()
			}
			return err
		})
		return r
	}
	r := startReg("127.0.0.1:0")
	addr := r.Addr().String()
	t.Cleanup(func() { r.Close() })
	p := startBin(t, "broker", "-data", t.TempDir(), "-listen", "127.0.0.1:0", "-registries", addr,
		"-set", "broker.register_interval=60s", "-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB")
	// The registrations of the broker's start are over once the twins
	// (its last part) are open and their topic is routed.
	p.waitLog(t, regexp.MustCompile(`msg="twins open"`), 60*time.Second)
	testutil.Eventually(t, 30*time.Second, func() error {
		if code, _, stderr := runBin(t, 30*time.Second, "admin", "-registry", addr, "topic", "route", "-t", "%SYS_TWIN"); code != exitOK {
			return errors.New(stderr)
		}
		return nil
	})
	registered := regexp.MustCompile(`msg="registered with registry"`)
	before := len(registered.FindAllString(p.stderr.String(), -1))

	r.Close()
	r = startReg(addr)
	testutil.WaitFor(t, 30*time.Second, "the broker registered with the restarted registry", func() bool {
		return len(registered.FindAllString(p.stderr.String(), -1)) > before
	})
	code, out, stderr := runBin(t, 30*time.Second, "admin", "-registry", addr, "cluster")
	if code != exitOK || !strings.Contains(out, "broker-a") {
		t.Fatalf("admin cluster on the restarted registry: exit %d\n%s\n%s", code, out, stderr)
	}
}
