// Command quickstart sends one message to SmartGo with the Go SDK
// (package client) and consumes it back. Start SmartGo first (`make run`),
// then:
//
//	go run ./examples/quickstart
//
// The README shows run below; a test keeps the two equal and runs it
// against a real cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/smartgo/smartgo/client"
)

func main() {
	registry := flag.String("registry", "127.0.0.1:9876", "registry (name server) `address`")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := run(ctx, *registry, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// README:begin
func run(ctx context.Context, registry string, out io.Writer) error {
	opts := client.ClientOptions{Registries: []string{registry}}

	// Produce: Send returns once the broker has stored the message.
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: opts})
	if err != nil {
		return err
	}
	defer p.Close()
	res, err := p.Send(ctx, &client.Message{Topic: "QuickStart", Tags: "greeting",
		Keys: []string{"order-1"}, Body: []byte("hello, SmartGo")})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sent %s to %s queue %d\n", res.MsgID, res.Queue.BrokerName, res.Queue.QueueID)

	// Consume: a push consumer in group "quickstart" calls the handler;
	// returning ConsumeSuccess commits the offsets.
	got := make(chan *client.MessageExt, 1)
	c, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: opts, Group: "quickstart",
		From: client.ConsumeFromFirst},
		func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				select {
				case got <- m:
				default:
				}
			}
			return client.ConsumeSuccess
		})
	if err != nil {
		return err
	}
	if err := c.Subscribe("QuickStart", "greeting"); err != nil { // tag expression; "*" for all
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer c.Close()
	select {
	case m := <-got:
		fmt.Fprintf(out, "received %q (key %v)\n", m.Body, m.Keys)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// README:end
