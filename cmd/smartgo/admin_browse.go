package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

// `msg browse`: mqadmin printMsgByQueue and queryMsgByOffset, reading a
// topic's messages without committing anything.
func init() {
	registerAdmin(adminCommand{name: "msg browse", synopsis: "-t TOPIC [-q QUEUE] [-broker NAME] [-offset N] [-max N]",
		summary: "read a topic's messages by queue offset (nothing committed)",
		description: "Reads messages of a topic, queue by queue (every queue of every broker group,\n" +
			"or -broker's, or queue -q), from -offset (default: each queue's first\n" +
			"message), -max in all, as mqadmin printMsgByQueue and queryMsgByOffset do.\n" +
			"Nothing is committed: no consumer group's progress moves.",
		examples: []string{"smartgo admin msg browse -t MQTT_INGRESS", "smartgo admin msg browse -t Orders -broker broker-a -q 0 -offset 100 -max 10 -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			topic := fs.String("t", "", "`topic` name")
			queue := fs.Int("q", -1, "`queue` id (default: every queue)")
			broker := fs.String("broker", "", "broker group `name` (default: every one)")
			offset := fs.Int64("offset", -1, "first queue `offset` to read (default: each queue's first message)")
			maxMsgs := fs.Int("max", 32, "most `messages` to print (1.."+strconv.Itoa(admin.MaxBrowse)+")")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*topic, "-t"); err != nil {
					return err
				}
				if *maxMsgs < 1 || *maxMsgs > admin.MaxBrowse {
					return usagef("-max must be between 1 and %d, not %d", admin.MaxBrowse, *maxMsgs)
				}
				// Broker groups that do not answer leave their queues out:
				// what the others hold is printed, then the error naming
				// them (exit 1).
				stats, perr := e.a.QueueStats(ctx, *topic)
				if perr != nil && !errors.Is(perr, admin.ErrPartial) {
					return perr
				}
				var out []*client.MessageExt
				matched := false
				for _, qs := range stats {
					q := qs.Queue
					if (*queue >= 0 && q.QueueID != int32(*queue)) || (*broker != "" && q.BrokerName != *broker) {
						continue
					}
					matched = true
					from := max(*offset, qs.MinOffset)
					for from < qs.MaxOffset && len(out) < *maxMsgs {
						msgs, next, _, _, err := e.a.BrowseMessages(ctx, *topic, q.BrokerName, q.QueueID, from, *maxMsgs-len(out))
						if err != nil {
							return err
						}
						out = append(out, msgs...)
						if next <= from {
							break
						}
						from = next
					}
				}
				if !matched && perr == nil {
					// A queue or broker group the topic does not have: say
					// so rather than print an empty list.
					return fmt.Errorf("%w: topic %s has no queue%s", client.ErrNoRoute, *topic, queueDesc(*queue, *broker))
				}
				e.out.messages(out)
				return perr
			}
		}})
}

// queueDesc names the queues msg browse's -q and -broker select.
func queueDesc(queue int, broker string) string {
	d := ""
	if queue >= 0 {
		d = " " + strconv.Itoa(queue)
	}
	if broker != "" {
		d += " on broker group " + strconv.Quote(broker)
	}
	return d
}
