// Package client is SmartGo's Go SDK: producers, push and pull consumers.
// It speaks RocketMQ's remoting protocol, so it also works against Apache
// RocketMQ 4.x brokers and registries, and RocketMQ's own clients work
// against SmartGo.
//
// # Producing
//
// A Producer looks topic routes up in the registries (name servers) and
// sends each message to a writable queue of a master broker:
//
//	p, err := client.NewProducer(client.ProducerOptions{
//		ClientOptions: client.ClientOptions{Registries: []string{"127.0.0.1:9876"}},
//	})
//	if err != nil { ... }
//	defer p.Close()
//	res, err := p.Send(ctx, &client.Message{Topic: "orders", Body: body, Tags: "paid", Keys: []string{orderID}})
//
// Send returns once the broker stored the message (with the broker's
// flush and replication settings: a sync-flush or sync-master broker
// answers after the disk or the slave has it). SendAsync and
// SendAsyncChan return at once and report later; under load they batch
// sends of one topic into one request (ProducerOptions.AutoBatchRequests),
// which is how the SDK reaches its throughput. SendOrderly routes by key
// to one queue, SendBatch sends several messages of one topic in one
// request, SendOneway does not wait for an answer.
//
// # Consuming
//
// A PushConsumer calls a Handler with the messages of its subscriptions.
// The members of a consumer group share the queues (clustering) or each
// receive everything (broadcasting); offsets are committed for the group:
//
//	c, err := client.NewPushConsumer(client.ConsumerOptions{
//		ClientOptions: client.ClientOptions{Registries: []string{"127.0.0.1:9876"}},
//		Group:         "billing",
//	}, func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
//		for _, m := range msgs { ... }
//		return client.ConsumeSuccess // ConsumeRetryLater redelivers later
//	})
//	if err != nil { ... }
//	_ = c.Subscribe("orders", "paid || refunded") // "*" for every tag
//	if err := c.Start(ctx); err != nil { ... }
//	defer c.Close()
//
// Delivery is at least once: a handler may see a message again after a
// crash or a rebalance, so handlers should be idempotent (MessageExt.MsgID
// identifies a message). A message handed back too often goes to the
// group's dead-letter queue. With ConsumerOptions.Orderly each queue is
// consumed in order, one batch at a time. When an admin resets the group's
// offsets (smartgo admin offset reset, mqadmin resetOffsetByTime), the
// broker's notice makes push and pull consumers drop what they hold of the
// topic's queues and continue from the new offsets.
//
// A PullConsumer leaves the loop to the caller: Assign queues (or
// Subscribe and let the group rebalance), Poll, Commit. Its StartOffsets
// are written as the group's offsets before it takes any queue, so every
// member that takes one of those queues, at Start or later, starts there.
//
// # Errors, lifetimes and options
//
// Every error wraps one of the sentinels in errors.go (ErrNoRoute,
// ErrBrokerUnavailable, ErrTimeout, ErrBusy, ...) or a context error; a
// broker's error code travels as a *BrokerError. Calls take a context for
// their deadline; without one, ClientOptions.RequestTimeout applies.
// Producers and consumers are safe for concurrent use, own their
// connections and goroutines (nothing is global), and Close waits for
// them. Zero option values take the defaults documented on each field;
// Validate reports a bad value before anything starts.
//
// Package client/admin holds the administration calls (topics, groups,
// offsets, message lookup), and package client/statestore a client of the
// key-value state store over MQTT 5.
package client
