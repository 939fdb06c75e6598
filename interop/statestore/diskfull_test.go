package statestore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	aioerrors "github.com/Azure/iot-operations-sdks/go/services/statestore/errors"
	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/store"
)

// TestStateStoreDiskFullAnswer: once the broker's disk is past its full
// mark (the store's disk usage hook says 99 %), a SET is answered with
// the protocol's quota error, which the Azure IoT Operations Go client
// returns as its errors.QuotaExceeded, and with properties saying the
// disk is full, which SmartGo's client returns as ErrDiskFull (DEL too);
// GETs keep working and the refused writes changed nothing; writes work
// again once the disk has room. Both ways the front reaches the shard:
// in process (standalone) and over remoting. The answer used to be 503
// "the state store shard is unavailable", which says nothing of the disk.
func TestStateStoreDiskFullAnswer(t *testing.T) {
	for _, local := range []bool{true, false} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			var usage atomic.Uint64
			usage.Store(math.Float64bits(0.5))
			e := startEnvStore(t, false, local, func(so *store.Options) {
				so.DiskUsage = func(string) (float64, error) { return math.Float64frombits(usage.Load()), nil }
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c := e.dial(t, "df-smartgo")
			testutil.WaitFor(t, 10*time.Second, "the front's route", func() bool {
				_, _, err := c.Set(ctx, []byte("kept"), []byte("v0"), sscli.SetOptions{})
				return err == nil
			})
			az := azureClient(t, e, "df-azure")
			pc := dialPipe(t, e.addr, "df-raw")

			usage.Store(math.Float64bits(0.99)) // another process filled the disk
			var err error
			testutil.WaitFor(t, 20*time.Second, "a SET refused for the full disk", func() bool {
				_, _, err = c.Set(ctx, []byte("probe"), []byte("v"), sscli.SetOptions{})
				return err != nil
			})
			if !errors.Is(err, sscli.ErrDiskFull) || !errors.Is(err, statestore.ErrQuota) {
				t.Fatalf("SmartGo client SET on a full disk: %v, want ErrDiskFull and ErrQuota", err)
			}
			if _, err := c.Del(ctx, []byte("kept"), statestore.HLC{}); !errors.Is(err, sscli.ErrDiskFull) {
				t.Fatalf("SmartGo client DEL on a full disk: %v, want ErrDiskFull", err)
			}
			if v, _, ok, err := c.Get(ctx, []byte("kept")); err != nil || !ok || string(v) != "v0" {
				t.Fatalf("SmartGo client GET on a full disk: %q %v %v", v, ok, err)
			}

			if _, err := az.Set(ctx, "new", "v1"); !errors.Is(err, aioerrors.QuotaExceeded) {
				t.Fatalf("Azure client SET on a full disk: %v, want %q", err, aioerrors.QuotaExceeded)
			}
			if r, err := az.Get(ctx, "kept"); err != nil || r.Value != "v0" {
				t.Fatalf("Azure client GET on a full disk: %q %v", r.Value, err)
			}
			if r, err := az.Get(ctx, "new"); err != nil || r.Value != "" || !r.Version.IsZero() {
				t.Fatalf("the refused SET changed the key: %q %v %v", r.Value, r.Version, err)
			}

			// On the wire: __stat 200, the quota error, and why.
			p := pc.wait(t, []string{pc.send(t, "SET", "raw", "v")})[0]
			u := p.Properties.User
			if u.Get(statestore.PropStatus) != "200" || string(p.Payload) != "-ERR the quota has been exceeded\r\n" ||
				u.Get(statestore.PropStatusMessage) != statestore.DiskFullMessage || u.Get(statestore.PropRefusal) != statestore.RefusalDiskFull {
				t.Fatalf("raw SET on a full disk: payload %q, properties %v", p.Payload, u)
			}

			usage.Store(math.Float64bits(0.5))
			testutil.WaitFor(t, 20*time.Second, "writes accepted again", func() bool {
				_, err := az.Set(ctx, "new", "v1")
				return err == nil
			})
			if v, _, ok, err := c.Get(ctx, []byte("new")); err != nil || !ok || string(v) != "v1" {
				t.Fatalf("GET after the disk had room again: %q %v %v", v, ok, err)
			}
		})
	}
}
