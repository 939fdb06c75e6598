// Package interop holds tests that drive SmartGo with real RocketMQ
// clients. It is a separate module so the main module never depends on
// rocketmq-client-go. Run with:
//
//	cd interop && go test ./...
package interop
