package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// A pull on one of the consumer's extra pull connections that times out
// (a master that hangs answers nothing) asks for a route refresh, as a
// timeout on the main connection does: it used to be wrapped only, and a
// consumer whose queues sat on extra connections kept pulling from the
// hung master until the periodic refresh.
func TestPullTimeoutOnExtraConnRefreshesRoute(t *testing.T) {
	hung := testnet.Silent(t)

	opts := ConsumerOptions{Group: "G", PullConnections: 2}
	opts.Registries = []string{"127.0.0.1:1"}
	opts.RequestTimeout = 200 * time.Millisecond
	opts.fill()
	b, err := newConsumerBase(opts, protocol.ConsumeActively)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.closePullConns(); _ = b.core.close() }()
	if len(b.pullRCs) != 1 {
		t.Fatalf("%d extra pull connections, want 1", len(b.pullRCs))
	}
	b.core.mu.Lock()
	b.core.brokers["B"] = map[int64]string{protocol.MasterID: hung}
	b.core.mu.Unlock()

	mq := MessageQueue{Topic: "T", BrokerName: "B", QueueID: 1} // queue 1 of 2 connections: the extra one
	sub := &subscription{topic: "T", expr: "*", exprType: protocol.ExpressionTypeTag}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = b.pull(ctx, mq, sub, 0, protocol.MasterID, 0, 0)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("pull from a hung broker: %v, want ErrTimeout", err)
	}
	// The route task is not running (the consumer was not started), so a
	// refresh request stays in its wake channel.
	if len(b.core.routeWake) != 1 {
		t.Fatal("a pull timeout on an extra connection did not ask for a route refresh")
	}
}
