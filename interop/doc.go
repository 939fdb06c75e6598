// Package interop holds tests that drive SmartGo with real RocketMQ
// clients. It is a separate module so the main module never depends on
// rocketmq-client-go. Run with:
//
//	cd interop && go test ./...
//
// (`make interop` runs the same with -p 1.) Not with -race:
// rocketmq-client-go v2.1.2 races with itself, and the race detector
// fails the test that happens to run it. Seen in the nineteenth session
// in TestInteropConsumeAfterLogTailLost, 2 runs of 3 at load 4-6: the
// client's topic route refresh reads a subscription
// (internal.SubscriptionData.Clone, internal/model.go:70) that its
// rebalance writes (pushConsumer.messageQueueChanged,
// consumer/push_consumer.go:505), both in the client's own goroutines.
// SmartGo's side of every interop test runs in its own processes, which
// its main module's tests check with -race.
package interop
