package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

// upsertText is what `topic create|update` and `group create|update` print:
// which of the two happened, and that an update created what was missing.
func upsertText(kind, name, verb string, existed bool) string {
	switch {
	case existed:
		return fmt.Sprintf("%s %s: ok (updated)", kind, name)
	case verb == "update":
		return fmt.Sprintf("%s %s: ok (created: it did not exist)", kind, name)
	default:
		return fmt.Sprintf("%s %s: ok (created)", kind, name)
	}
}

// uniqueIDHint adds to a refused offset id what to type when it is a
// client message id instead (the MSG_ID column of every message listing,
// the same length as an offset id for IPv4): it is looked up by key.
func uniqueIDHint(err error, id string) error {
	if !errors.Is(err, admin.ErrClientMessageID) {
		return err
	}
	return fmt.Errorf("%w\nlook it up by key: smartgo admin msg by-key -uniq -t TOPIC -k %s", err, id)
}

// maxQueues bounds -r and -w (a typo such as -r 80000 is refused here
// rather than creating that many queue files on every broker).
const maxQueues = admin.MaxTopicQueues

func init() {
	registerAdmin(adminCommand{name: "topic list", summary: "every topic the registries know",
		description: "Lists every topic the registries know (system topics included).",
		examples:    []string{"smartgo admin topic list", "smartgo admin topic list -registry 10.0.0.1:9876 -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			return func(ctx context.Context, e *adminEnv) error {
				topics, err := e.a.ListTopics(ctx)
				if err != nil {
					return err
				}
				e.out.table(topics, []string{"TOPIC"}, func(add func(...any)) {
					for _, t := range topics {
						add(t)
					}
				})
				return nil
			}
		}})
	for _, verb := range []string{"create", "update"} {
		registerAdmin(adminCommand{name: "topic " + verb, synopsis: "-t TOPIC [-r N] [-w N] [-perm 2|4|6] [-order] [-cluster C]",
			summary: verb + " a topic on every master (of one cluster)",
			description: "Creates or updates a topic on every master broker (of -cluster, else of every\n" +
				"cluster); the brokers then register it with the registries. -perm is the\n" +
				"topic's access: 6 read and write, 4 read only, 2 write only. Both verbs\n" +
				"create a missing topic and update an existing one; the output says which\n" +
				"(JSON: \"created\": true when the topic did not exist). When some masters\n" +
				"do not answer, the others get the topic, the output names those (JSON:\n" +
				"\"result\": \"partial\", \"brokers\"), the error the silent ones, and the\n" +
				"exit status is 1: run it again once they are back. Fewer read queues (-r)\n" +
				"than queues that hold messages warn on stderr: no consumer reads those\n" +
				"messages until -r grows back.",
			examples: []string{"smartgo admin topic " + verb + " -t Orders -r 4 -w 4",
				"smartgo admin topic " + verb + " -t Orders -perm 4   # read only"},
			setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
				topic := fs.String("t", "", "`topic` name")
				readQ := fs.Int("r", admin.DefaultTopicQueues, "read `queues` (1.."+strconv.Itoa(maxQueues)+")")
				writeQ := fs.Int("w", admin.DefaultTopicQueues, "write `queues` (1.."+strconv.Itoa(maxQueues)+")")
				perm := fs.Int("perm", int(admin.DefaultTopicPerm), "`permission`: 6 read+write, 4 read only, 2 write only")
				order := fs.Bool("order", false, "ordered topic")
				cluster := clusterFlag(fs)
				return func(ctx context.Context, e *adminEnv) error {
					if err := required(*topic, "-t"); err != nil {
						return err
					}
					if err := client.ValidateTopic(*topic); err != nil {
						return usagef("-t: %v", err)
					}
					if *readQ < 1 || *readQ > maxQueues || *writeQ < 1 || *writeQ > maxQueues {
						return usagef("-r and -w must be between 1 and %d (got -r %d -w %d)", maxQueues, *readQ, *writeQ)
					}
					if *perm != 2 && *perm != 4 && *perm != 6 {
						return usagef("-perm must be 6 (read and write), 4 (read only) or 2 (write only), not %d", *perm)
					}
					existed, err := e.a.TopicExists(ctx, *cluster, *topic)
					if err != nil {
						return err
					}
					var before []admin.QueueStat
					if existed {
						before, _ = e.a.QueueStats(ctx, *topic) // best effort: only for the warning below
					}
					err = e.a.CreateTopic(ctx, *cluster, admin.TopicConfig{Name: *topic, ReadQueues: int32(*readQ),
						WriteQueues: int32(*writeQ), Perm: int32(*perm), Order: *order})
					if err != nil && !errors.Is(err, admin.ErrPartial) {
						return err
					}
					for _, w := range admin.HiddenWarnings(*topic, before, *readQ) {
						fmt.Fprintf(e.stderr, "warning: %s\n", w)
					}
					if on := admin.Answered(err); on != nil {
						e.out.message(map[string]any{"topic": *topic, "result": "partial", "created": !existed, "brokers": on},
							upsertText("topic", *topic, verb, existed)+" on "+strings.Join(on, ", "))
						return err // ErrPartial: the brokers it names do not have the topic
					}
					e.out.message(map[string]any{"topic": *topic, "result": "ok", "created": !existed}, upsertText("topic", *topic, verb, existed))
					return nil
				}
			}})
	}
	registerAdmin(adminCommand{name: "topic delete", synopsis: "-t TOPIC [-cluster C]",
		summary:     "delete a topic from the brokers and the registries",
		description: "Deletes a topic (its messages' queues, its offsets) from every master of\n-cluster (else of every cluster) and from every registry. A topic that\nno broker and no registry knows is an error; a broker's system topics\n(TBW102, SCHEDULE_TOPIC_XXXX, %SYS_STATESTORE, %SYS_TWIN, MQTT_SESSION, ...)\nare refused. When some masters do not answer, the others delete it, the\noutput names those, the error the silent ones (the registries keep the\ntopic then), and the exit status is 1: run it again once they are back.",
		examples:    []string{"smartgo admin topic delete -t Orders"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			topic := fs.String("t", "", "`topic` name")
			cluster := clusterFlag(fs)
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*topic, "-t"); err != nil {
					return err
				}
				err := e.a.DeleteTopic(ctx, *cluster, *topic)
				if on := admin.Answered(err); on != nil {
					e.out.message(map[string]any{"topic": *topic, "deleted": false, "brokers": on},
						fmt.Sprintf("topic %s deleted on %s; the registries still route it to the brokers that did not answer: run this again", *topic, strings.Join(on, ", ")))
					return err // ErrPartial: the brokers it names still have the topic
				}
				if err != nil {
					return err
				}
				e.out.message(map[string]any{"topic": *topic, "deleted": true}, fmt.Sprintf("topic %s deleted", *topic))
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "topic route", synopsis: "-t TOPIC", summary: "brokers and queues of a topic",
		description: "Shows the route the registries give clients for a topic: its brokers, their\naddresses, read and write queue counts and permission.",
		examples:    []string{"smartgo admin topic route -t Orders"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			topic := fs.String("t", "", "`topic` name")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*topic, "-t"); err != nil {
					return err
				}
				rd, err := e.a.TopicRoute(ctx, *topic)
				if err != nil {
					return err
				}
				addrs := map[string]string{}
				for _, bd := range rd.BrokerDatas {
					addrs[bd.BrokerName] = bd.MasterAddr()
				}
				e.out.table(rd, []string{"BROKER", "ADDR", "READ", "WRITE", "PERM"}, func(add func(...any)) {
					for _, qd := range rd.QueueDatas {
						add(qd.BrokerName, addrs[qd.BrokerName], qd.ReadQueueNums, qd.WriteQueueNums, qd.Perm)
					}
				})
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "topic stats", synopsis: "-t TOPIC", summary: "min/max offset per queue",
		description: "Shows each queue's smallest and largest offset and when its last message\nwas stored. A broker group that does not answer is named in the error (exit 1)\nafter the queues of the others.",
		examples:    []string{"smartgo admin topic stats -t Orders"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			topic := fs.String("t", "", "`topic` name")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*topic, "-t"); err != nil {
					return err
				}
				st, err := e.a.QueueStats(ctx, *topic)
				if err != nil && !errors.Is(err, admin.ErrPartial) {
					return err
				}
				e.out.table(st, []string{"BROKER", "QUEUE", "MIN", "MAX", "LAST_UPDATE"}, func(add func(...any)) {
					for _, s := range st {
						add(s.Queue.BrokerName, s.Queue.QueueID, s.MinOffset, s.MaxOffset, fmtMillis(s.LastUpdateTime))
					}
				})
				return err // ErrPartial: the table lacks the broker groups it names
			}
		}})
	registerAdmin(adminCommand{name: "cluster", summary: "brokers per group (role, address, max offset, replication lag) and MQTT bridge nodes",
		description: "Lists every broker the registries know, per cluster and broker group: id,\naddress, role, commitlog max offset and replication lag in bytes (for a\nslave: master end minus its end; for a master: how far its best slave's\nacknowledgement is behind); then every MQTT bridge node with its addresses\nand connection counts. JSON: {\"brokers\": [...], \"bridges\": [...]}.",
		examples:    []string{"smartgo admin cluster", "smartgo admin cluster -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			return func(ctx context.Context, e *adminEnv) error {
				members, err := e.a.ClusterMembers(ctx)
				if err != nil {
					return err
				}
				bridges, err := e.a.Bridges(ctx)
				if err != nil {
					return err
				}
				if e.out.json {
					e.out.writeJSON(map[string]any{"brokers": members, "bridges": bridges})
					return nil
				}
				defer printBridges(e.out, bridges)
				e.out.table(members, []string{"CLUSTER", "BROKER", "ID", "ADDR", "ROLE", "MAX_OFFSET", "LAG_BYTES"}, func(add func(...any)) {
					for _, m := range members {
						role := m.Role
						if m.Err != "" {
							role = "unreachable"
						}
						lag := "-"
						if m.LagBytes >= 0 {
							lag = strconv.FormatInt(m.LagBytes, 10)
						}
						add(m.Cluster, m.Name, m.ID, m.Addr, role, m.MaxOffset, lag)
					}
				})
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "broker stats", synopsis: "[-b ADDR] [-cluster C]", summary: "runtime statistics of brokers",
		description: "Shows a broker's runtime statistics (GET_BROKER_RUNTIME_INFO): by default\nof every master (of -cluster), or of the broker at -b. Brokers that do not\nanswer are named after the table (exit 1).",
		examples:    []string{"smartgo admin broker stats", "smartgo admin broker stats -b 127.0.0.1:10911 -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			brokerAddr := fs.String("b", "", "broker `address`, or a broker group's name for its master (empty: every master)")
			cluster := clusterFlag(fs)
			return func(ctx context.Context, e *adminEnv) error {
				targets, err := brokerTargets(ctx, e, *brokerAddr, *cluster)
				if err != nil {
					return err
				}
				all, err := brokerTables(ctx, targets, e.a.BrokerRuntimeInfo)
				if err != nil && !errors.Is(err, admin.ErrPartial) {
					return err
				}
				e.out.brokerKeys(targets, all)
				return err // ErrPartial: the brokers it names are missing
			}
		}})
	registerAdmin(adminCommand{name: "group progress", synopsis: "-g GROUP [-t TOPIC]", summary: "committed offset and lag per queue",
		description: "Shows a consumer group's committed offset, the broker's max offset and the\nlag per queue, for one topic or every topic the group consumes. A group no\nbroker knows is an error. Broker groups that do not answer are named after\nthe table (exit 1).",
		examples:    []string{"smartgo admin group progress -g billing", "smartgo admin group progress -g billing -t Orders -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			group := fs.String("g", "", "consumer `group`")
			topic := fs.String("t", "", "`topic` (empty: every topic of the group)")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*group, "-g"); err != nil {
					return err
				}
				prog, err := e.a.GroupProgress(ctx, *group, *topic)
				if err != nil && !errors.Is(err, admin.ErrPartial) {
					return err
				}
				if len(prog) == 0 && err == nil && *topic != "" {
					// Nothing consumed there yet, or no such topic: tell
					// the second apart (a mistyped -t printed an empty table).
					if _, rerr := e.a.TopicRoute(ctx, *topic); errors.Is(rerr, client.ErrTopicNotExist) {
						return rerr
					}
				}
				var lag int64
				for _, p := range prog {
					lag += p.Lag
				}
				e.out.table(map[string]any{"group": *group, "queues": prog, "totalLag": lag},
					[]string{"TOPIC", "BROKER", "QUEUE", "BROKER_OFFSET", "CONSUMER_OFFSET", "LAG", "LAST_CONSUMED"}, func(add func(...any)) {
						for _, p := range prog {
							add(p.Queue.Topic, p.Queue.BrokerName, p.Queue.QueueID, p.BrokerOffset, p.ConsumerOffset, p.Lag, fmtMillis(p.LastTimestamp))
						}
						add("TOTAL", "", "", "", "", lag, "")
					})
				return err // ErrPartial: the table lacks the broker groups it names
			}
		}})
	registerAdmin(adminCommand{name: "msg by-id", synopsis: "-id OFFSET_MSG_ID", summary: "a message by its offset id",
		description: "Reads one message by its offset message id (a send result's OffsetMsgID:\nthe broker address and commitlog offset in hex), from the broker it names,\nor, when that broker is down (a failover), from the replica holding its record.",
		examples:    []string{"smartgo admin msg by-id -id 7F00000100002A9F0000000000000000"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			msgID := fs.String("id", "", "offset message `id`")
			fs.StringVar(msgID, "i", "", "the same as -id (mqadmin's name)")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*msgID, "-id"); err != nil {
					return err
				}
				m, err := e.a.MessageByID(ctx, *msgID)
				if err != nil {
					return uniqueIDHint(err, *msgID)
				}
				e.out.messages([]*client.MessageExt{m})
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "msg resend", synopsis: "-id OFFSET_MSG_ID -g GROUP", summary: "deliver a stored message to one consumer group again",
		description: "Delivers a stored message (by its offset message id) again to one consumer\ngroup, as the console's \"Resend to group\": the broker holding it copies it\nto the group's retry topic with a one-second delay, so only that group's\nconsumers get it, with its original topic; a dead letter (from\n%DLQ%<group>) too. The group must exist on that broker.",
		examples:    []string{"smartgo admin msg resend -id 7F00000100002A9F0000000000000000 -g billing"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			msgID := fs.String("id", "", "offset message `id`")
			fs.StringVar(msgID, "i", "", "the same as -id")
			group := fs.String("g", "", "consumer `group` to deliver it to")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*msgID, "-id"); err != nil {
					return err
				}
				if err := required(*group, "-g"); err != nil {
					return err
				}
				if err := e.a.ResendToGroup(ctx, *msgID, *group); err != nil {
					return uniqueIDHint(err, *msgID)
				}
				e.out.table(map[string]any{"msgId": *msgID, "group": *group, "resent": true},
					[]string{"MSG_ID", "GROUP", "RESENT"}, func(add func(...any)) { add(*msgID, *group, true) })
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "msg by-key", synopsis: "-t TOPIC -k KEY [-max N] [-uniq]", summary: "messages by business key (or UNIQ_KEY)",
		description: "Finds a topic's messages by business key (the KEYS property) through the\nbrokers' key index, or with -uniq by client message id (UNIQ_KEY).",
		examples:    []string{"smartgo admin msg by-key -t Orders -k order-42", "smartgo admin msg by-key -t Orders -k 0A0B0C...  -uniq -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			topic := fs.String("t", "", "`topic` name")
			key := fs.String("k", "", "message `key`")
			uniq := fs.Bool("uniq", false, "look -k up as a UNIQ_KEY (client message id)")
			maxNum := fs.Int("max", 64, "most `messages` to return")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*topic, "-t"); err != nil {
					return err
				}
				if err := required(*key, "-k"); err != nil {
					return err
				}
				if *maxNum < 1 {
					return usagef("-max must be at least 1, not %d", *maxNum)
				}
				msgs, err := e.a.MessagesByKey(ctx, *topic, *key, *maxNum, time.Time{}, time.Time{}, *uniq)
				if err != nil && !errors.Is(err, admin.ErrPartial) {
					return err
				}
				e.out.messages(msgs)
				return err // ErrPartial: the messages of the broker groups it names are missing
			}
		}})
	registerAdmin(adminCommand{name: "offset reset", synopsis: "-g GROUP -t TOPIC -ts TIME", summary: "move a group's offsets to a time",
		description: "Sets a consumer group's committed offset on every queue of a topic to the\nfirst message stored at TIME (RFC 3339, unix milliseconds, a duration\nago such as 1h, or now: skip everything stored so far, as mqadmin\nskipAccumulatedMessage). As mqadmin resetOffsetByTime: each broker\ncommits the new offsets and tells the group's running consumers, which\ncontinue from there (SmartGo's SDK at once, rocketmq-client-go after a\n10 s pause). A group no broker knows is an error: create it first with\n`group create` to set where its consumers will start.",
		examples: []string{"smartgo admin offset reset -g billing -t Orders -ts 1h", "smartgo admin offset reset -g billing -t Orders -ts 2026-01-02T15:04:05Z",
			"smartgo admin offset reset -g billing -t Orders -ts now"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			group := fs.String("g", "", "consumer `group`")
			topic := fs.String("t", "", "`topic` name")
			ts := fs.String("ts", "", "`time`: RFC 3339, unix ms, a duration ago (1h), or now")
			fs.StringVar(ts, "s", "", "the same as -ts (mqadmin's name; its yyyy-MM-dd#HH:mm:ss:SSS in local time too)")
			return func(ctx context.Context, e *adminEnv) error {
				for _, r := range [][2]string{{*group, "-g"}, {*topic, "-t"}, {*ts, "-ts"}} {
					if err := required(r[0], r[1]); err != nil {
						return err
					}
				}
				at, err := parseTime(*ts)
				if err != nil {
					return usagef("-ts: %v", err)
				}
				resets, err := e.a.ResetOffset(ctx, *group, *topic, at)
				if err != nil {
					return err
				}
				e.out.table(resets, []string{"BROKER", "QUEUE", "OLD", "NEW"}, func(add func(...any)) {
					for _, r := range resets {
						add(r.Queue.BrokerName, r.Queue.QueueID, r.OldOffset, r.NewOffset)
					}
				})
				return nil
			}
		}})
}
