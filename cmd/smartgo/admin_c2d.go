package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/bridge/iothub"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/twin"
)

// `smartgo admin device send`: a cloud-to-device message, produced to the
// bridge's egress topic exactly as the IoT hub's HTTPS API stores one.

func init() {
	registerAdmin(adminCommand{name: "device send", synopsis: "-d DEVICE -body TEXT|@FILE [-id MSGID] [-ttl D] [-p name=value ...] [-egress TOPIC]",
		summary: "send a cloud-to-device message to a device",
		description: "Stores a cloud-to-device message for a registered device in the bridge's\n" +
			"egress topic: bridge nodes deliver it on devices/{id}/messages/devicebound/\n" +
			"(QoS 1) when the device is connected, or when its persistent session\n" +
			"resumes, until it expires (-ttl); an IoT hub node first gives a device\n" +
			"that has no session one, so its first connect gets the message. -p adds\n" +
			"application properties. The message counts in the device's\n" +
			"cloudToDeviceMessageCount until the device acknowledges it or it expires;\n" +
			"a device holding -max-queue-depth such messages refuses one more (403\n" +
			"DeviceMaximumQueueDepthExceeded), as the hub's API does.",
		examples: []string{"smartgo admin device send -d pump-17 -body '{\"valve\":\"open\"}' -p priority=high",
			"smartgo admin device send -d pump-17 -body @command.json -ttl 10m -id cmd-42"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			dev := fs.String("d", "", "`device` id")
			body := fs.String("body", "", "the message `text`, or @FILE for a file's bytes")
			id := fs.String("id", "", "message `id` (generated when empty)")
			ttl := fs.Duration("ttl", iothub.DefaultC2DTTL, "how long the message may wait for the device (`duration`)")
			egress := fs.String("egress", bridge.DefaultEgressTopic, "the bridges' egress `topic` (bridge.egress_topic)")
			depth := fs.Int("max-queue-depth", iothub.DefaultC2DMaxQueueDepth,
				"the most unacknowledged messages the device may hold (`n`, iothub.c2d_max_queue_depth)")
			var props setList
			fs.Var(&props, "p", "application property `name=value` (repeatable)")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*dev, "-d"); err != nil {
					return err
				}
				data := []byte(*body)
				if path, ok := strings.CutPrefix(*body, "@"); ok {
					var err error
					if data, err = os.ReadFile(path); err != nil {
						return usagef("-body: %v", err)
					}
				}
				if *ttl <= 0 {
					return usagef("-ttl must be positive, not %s", *ttl)
				}
				m := &iothub.C2DMessage{DeviceID: *dev, MessageID: *id, Body: data, Expiry: time.Now().Add(*ttl)}
				for _, kv := range props {
					m.Properties = append(m.Properties, iothub.Property{Name: kv.key, Value: kv.value})
				}
				if err := iothub.PrepareC2D(m, iothub.DefaultC2DMaxSize, *ttl, iothub.DefaultC2DMaxTTL, time.Now()); err != nil {
					return err
				}
				tc, err := twinClient(e)
				if err != nil {
					return err
				}
				if _, err := tc.GetDevice(ctx, *dev); err != nil {
					return err
				}
				if *depth < 1 || *depth > twin.MaxC2DQueueDepth {
					return usagef("-max-queue-depth must be 1..%d, not %d", twin.MaxC2DQueueDepth, *depth)
				}
				if _, err := tc.EnqueueC2D(ctx, *dev, m.MessageID, m.Expiry, *depth); err != nil {
					return err
				}
				// As the HTTPS API does: a device that never connected (or
				// whose session ended) gets a session holding its
				// subscription first, so the message waits for it.
				prepared, err := e.a.PrepareC2D(ctx, *dev)
				if err != nil {
					return fmt.Errorf("session for %s's cloud-to-device messages: %w", *dev, err)
				}
				if !prepared {
					warnNoC2DSession(ctx, e, *dev)
				}
				cm, err := bridge.EncodeMessage(m.MQTT(m.Expiry), *egress)
				if err != nil {
					return err
				}
				p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: e.registries}})
				if err != nil {
					return err
				}
				defer p.Close()
				if _, err := p.SendOrderly(ctx, cm, *dev, client.HashSelector); err != nil {
					_ = tc.AckC2D(ctx, *dev, m.MessageID) // not stored: out of the count (else it leaves at its expiry)
					return fmt.Errorf("send to %s: %w", *egress, err)
				}
				e.out.message(map[string]any{"deviceId": *dev, "messageId": m.MessageID, "expiry": m.Expiry.UTC().Format(time.RFC3339)},
					fmt.Sprintf("message %s stored for %s (expires %s)", m.MessageID, *dev, m.Expiry.UTC().Format(time.RFC3339)))
				return nil
			}
		}})
}

// warnNoC2DSession warns, when no bridge node is an IoT hub (none gave
// the device a session), that a device with no persistent session gets
// the message only if it is connected now: a message stored for a device
// that connects later, with no session to hold it, is never delivered.
// Nothing is said when the bridges cannot be asked (none runs: the
// session table cannot be read either).
func warnNoC2DSession(ctx context.Context, e *adminEnv, dev string) {
	node, err := anyNode(ctx, e.a, "")
	if err != nil {
		return
	}
	p, err := e.a.MQTTSessions(ctx, node, admin.MQTTQuery{Prefix: dev, Limit: 1})
	if err != nil || len(p.Items) > 0 && p.Items[0].ClientID == dev {
		return
	}
	fmt.Fprintf(e.stderr, "warning: %s has no persistent MQTT session and no bridge node is an IoT hub (iothub.enabled) to give it one: "+
		"the message reaches it only if it is connected now (a device that connects later with clean session 0 does not get it)\n", dev)
}
