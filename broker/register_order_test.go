package broker

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestRegistrationAnsweredBeforeTheNext: a topic creation waits for its
// registration at most syncRegisterTimeout (3 s) and is then answered,
// while the registration is still queued at a slow registry. The broker
// retries the registration at once, but must not send it before the
// registry answered the first: a registry serves requests on several
// workers, so the older table could be applied after the newer one and
// the registry would drop the topics it lacks until the next periodic
// registration. Before, the retry was sent as soon as the creation gave
// up, and the registry held two of the broker's registrations at once.
func TestRegistrationAnsweredBeforeTheNext(t *testing.T) {
	const topic = "ORDER_T"
	var inFlight, most, withTopic atomic.Int32
	var answered atomic.Int32
	srv, err := remoting.NewServer(remoting.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterFunc(protocol.RegisterBroker, remoting.PoolDefault, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if bytes.Contains(req.Body, []byte(topic)) && withTopic.Add(1) == 1 {
			// A slow registry: longer than the creation waits (3 s),
			// shorter than a registration's timeout (6 s).
			time.Sleep(4 * time.Second)
		}
		answered.Add(1)
		return protocol.NewResponse(protocol.Success, ""), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	b := testBroker(t, t.TempDir(), func(o *Options) {
		o.Registries = []string{srv.Addr().String()}
		o.RegisterInterval = time.Minute
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		if answered.Load() == 0 {
			return errors.New("the start's registration not answered yet")
		}
		return nil
	})
	tc := newTestClient(t, b.Addr())
	h := protocol.CreateTopicRequestHeader{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermRW}
	began := time.Now()
	resp := tc.invoke(protocol.UpdateAndCreateTopic, &h, nil)
	if resp.Code != protocol.Success {
		t.Fatalf("create %s: %d %s", topic, resp.Code, resp.Remark)
	}
	t.Logf("creation answered after %v", time.Since(began))
	// The retry carries the topic too; it is sent once the slow one was
	// answered.
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := withTopic.Load(); n < 2 {
			return errors.New("no second registration with the topic yet")
		}
		return nil
	})
	if m := most.Load(); m != 1 {
		t.Fatalf("the registry held %d of the broker's registrations at once", m)
	}
}
