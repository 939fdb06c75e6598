package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"syscall"
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
	// The broker is awaited in the restarted registry itself: its
	// "registered with registry" line is logged only after a failed
	// registration, and a registry back before the broker's registration
	// after the close takes that registration at the first try.
	restart := func(stopped bool) {
		t.Helper()
		if stopped {
			if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
		r = startReg(addr)
		if stopped {
			if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
		testutil.Eventually(t, 30*time.Second, func() error {
			code, out, stderr := runBin(t, 30*time.Second, "admin", "-registry", addr, "cluster")
			if code != exitOK || !strings.Contains(out, "broker-a") {
				return fmt.Errorf("admin cluster on the registry restarted (broker stopped meanwhile: %v): exit %d\n%s\n%s",
					stopped, code, out, stderr)
			}
			return nil
		})
	}
	// The broker's registration after the close finds the registry down
	// (or back already) and is retried until it answers.
	restart(false)
	// The registry is back before the broker sees the close: the first
	// registration after the close succeeds.
	restart(true)
}
