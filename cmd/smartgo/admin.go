package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

const adminCommands = `
Commands:
  topic list                          every topic the registries know
  topic create -t TOPIC [-r N -w N -perm P -order -cluster C]
  topic update -t TOPIC [...]         same flags as create
  topic delete -t TOPIC [-cluster C]  from the brokers and the registries
  topic route  -t TOPIC               brokers and queues of a topic
  topic stats  -t TOPIC               min/max offset per queue
  cluster                             brokers per group: role, address, max offset, replication lag
  broker stats [-b ADDR]              runtime statistics (every master by default)
  group progress -g GROUP [-t TOPIC]  committed offset and lag per queue
  msg by-id  -id OFFSET_MSG_ID        a message by its offset id
  msg by-key -t TOPIC -k KEY [-max N] messages by business key (-uniq: by UNIQ_KEY)
  offset reset -g GROUP -t TOPIC -ts TIME
                                      set the group's offsets to the first message
                                      stored at TIME (RFC 3339, unix ms, or a
                                      duration ago such as 1h). Client-side: stop
                                      the group's consumers first, or they may
                                      commit over the reset.`

func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("admin", "<command> [-registry ADDR] [-o table|json] ...", `
Administers a SmartGo cluster through its registries and brokers: topics,
clusters, consumer group progress, message lookup by id and key, offsets,
broker runtime statistics.`+adminCommands, stderr)
	registry := fs.String("registry", "127.0.0.1:9876", "registry `address` (comma-separated for several)")
	format := fs.String("o", "table", "output `format`: table or json")
	topic := fs.String("t", "", "`topic`")
	group := fs.String("g", "", "consumer `group`")
	cluster := fs.String("cluster", "", "`cluster` name (empty: every cluster)")
	readQ := fs.Int("r", 8, "read `queues` (topic create/update)")
	writeQ := fs.Int("w", 8, "write `queues` (topic create/update)")
	perm := fs.Int("perm", 6, "topic `permission` bits: 2 write, 4 read")
	order := fs.Bool("order", false, "ordered topic")
	brokerAddr := fs.String("b", "", "broker `address`")
	msgID := fs.String("id", "", "offset message `id`")
	key := fs.String("k", "", "message `key`")
	uniq := fs.Bool("uniq", false, "look -k up as a UNIQ_KEY (client message id)")
	maxNum := fs.Int("max", 64, "most `messages` to return")
	ts := fs.String("ts", "", "`time` for offset reset")
	timeout := fs.Duration("timeout", 10*time.Second, "overall `timeout`")
	var words []string
	for {
		if code, ok := parseFlags(fs, args); !ok {
			return code
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		words, args = append(words, rest[0]), rest[1:]
	}
	if len(words) == 0 {
		fmt.Fprintln(stderr, "smartgo admin: missing command")
		fs.Usage()
		return exitUsage
	}
	if *format != "table" && *format != "json" {
		fmt.Fprintf(stderr, "smartgo admin: -o must be table or json, not %q\n", *format)
		return exitUsage
	}
	a, err := admin.New(admin.Options{Registries: admin.ParseRegistries(*registry)})
	if err != nil {
		fmt.Fprintf(stderr, "smartgo admin: %v\n", err)
		return exitUsage
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	out := &output{w: stdout, json: *format == "json"}
	need := func(v, name string) bool {
		if v == "" {
			fmt.Fprintf(stderr, "smartgo admin %s: %s is required\n", strings.Join(words, " "), name)
			return false
		}
		return true
	}

	cmd := strings.Join(words, " ")
	switch cmd {
	case "topic list":
		topics, err := a.ListTopics(ctx)
		if err != nil {
			return fail(stderr, cmd, err)
		}
		out.table(topics, []string{"TOPIC"}, func(add func(...any)) {
			for _, t := range topics {
				add(t)
			}
		})
	case "topic create", "topic update":
		if !need(*topic, "-t") {
			return exitUsage
		}
		err := a.CreateTopic(ctx, *cluster, admin.TopicConfig{Name: *topic, ReadQueues: int32(*readQ), WriteQueues: int32(*writeQ), Perm: int32(*perm), Order: *order})
		if err != nil {
			return fail(stderr, cmd, err)
		}
		out.message(map[string]any{"topic": *topic, "result": "ok"}, fmt.Sprintf("topic %s: ok", *topic))
	case "topic delete":
		if !need(*topic, "-t") {
			return exitUsage
		}
		if err := a.DeleteTopic(ctx, *cluster, *topic); err != nil {
			return fail(stderr, cmd, err)
		}
		out.message(map[string]any{"topic": *topic, "deleted": true}, fmt.Sprintf("topic %s deleted", *topic))
	case "topic route":
		if !need(*topic, "-t") {
			return exitUsage
		}
		rd, err := a.TopicRoute(ctx, *topic)
		if err != nil {
			return fail(stderr, cmd, err)
		}
		addrs := map[string]string{}
		for _, bd := range rd.BrokerDatas {
			addrs[bd.BrokerName] = bd.MasterAddr()
		}
		out.table(rd, []string{"BROKER", "ADDR", "READ", "WRITE", "PERM"}, func(add func(...any)) {
			for _, qd := range rd.QueueDatas {
				add(qd.BrokerName, addrs[qd.BrokerName], qd.ReadQueueNums, qd.WriteQueueNums, qd.Perm)
			}
		})
	case "topic stats":
		if !need(*topic, "-t") {
			return exitUsage
		}
		st, err := a.TopicStats(ctx, *topic)
		if err != nil {
			return fail(stderr, cmd, err)
		}
		out.table(st, []string{"BROKER", "QUEUE", "MIN", "MAX", "LAST_UPDATE"}, func(add func(...any)) {
			for _, s := range st {
				add(s.Queue.BrokerName, s.Queue.QueueID, s.MinOffset, s.MaxOffset, fmtMillis(s.LastUpdateTime))
			}
		})
	case "cluster":
		members, err := a.ClusterMembers(ctx)
		if err != nil {
			return fail(stderr, cmd, err)
		}
		out.table(members, []string{"CLUSTER", "BROKER", "ID", "ADDR", "ROLE", "MAX_OFFSET", "LAG_BYTES"}, func(add func(...any)) {
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
	case "broker stats":
		targets := []admin.Broker{{Addr: *brokerAddr}}
		if *brokerAddr == "" {
			if targets, err = a.Masters(ctx, *cluster); err != nil {
				return fail(stderr, cmd, err)
			}
		}
		all := map[string]map[string]string{}
		for _, b := range targets {
			info, err := a.BrokerRuntimeInfo(ctx, b.Addr)
			if err != nil {
				return fail(stderr, cmd, err)
			}
			all[b.Addr] = info
		}
		out.table(all, []string{"BROKER", "KEY", "VALUE"}, func(add func(...any)) {
			for _, b := range targets {
				keys := make([]string, 0, len(all[b.Addr]))
				for k := range all[b.Addr] {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					add(b.Addr, k, all[b.Addr][k])
				}
			}
		})
	case "group progress":
		if !need(*group, "-g") {
			return exitUsage
		}
		prog, err := a.GroupProgress(ctx, *group, *topic)
		if err != nil {
			return fail(stderr, cmd, err)
		}
		var lag int64
		for _, p := range prog {
			lag += p.Lag
		}
		out.table(map[string]any{"group": *group, "queues": prog, "totalLag": lag}, []string{"TOPIC", "BROKER", "QUEUE", "BROKER_OFFSET", "CONSUMER_OFFSET", "LAG", "LAST_CONSUMED"}, func(add func(...any)) {
			for _, p := range prog {
				add(p.Queue.Topic, p.Queue.BrokerName, p.Queue.QueueID, p.BrokerOffset, p.ConsumerOffset, p.Lag, fmtMillis(p.LastTimestamp))
			}
			add("TOTAL", "", "", "", "", lag, "")
		})
	case "msg by-id":
		if !need(*msgID, "-id") {
			return exitUsage
		}
		m, err := a.MessageByID(ctx, *msgID)
		if err != nil {
			return fail(stderr, cmd, err)
		}
		out.messages([]*client.MessageExt{m})
	case "msg by-key":
		if !need(*topic, "-t") || !need(*key, "-k") {
			return exitUsage
		}
		msgs, err := a.MessagesByKey(ctx, *topic, *key, *maxNum, time.Time{}, time.Time{}, *uniq)
		if err != nil {
			return fail(stderr, cmd, err)
		}
		out.messages(msgs)
	case "offset reset":
		if !need(*group, "-g") || !need(*topic, "-t") || !need(*ts, "-ts") {
			return exitUsage
		}
		at, err := parseTime(*ts)
		if err != nil {
			fmt.Fprintf(stderr, "smartgo admin offset reset: -ts: %v\n", err)
			return exitUsage
		}
		resets, err := a.ResetOffset(ctx, *group, *topic, at)
		if err != nil {
			return fail(stderr, cmd, err)
		}
		out.table(resets, []string{"BROKER", "QUEUE", "OLD", "NEW"}, func(add func(...any)) {
			for _, r := range resets {
				add(r.Queue.BrokerName, r.Queue.QueueID, r.OldOffset, r.NewOffset)
			}
		})
	default:
		fmt.Fprintf(stderr, "smartgo admin: unknown command %q\n%s\n", cmd, strings.TrimPrefix(adminCommands, "\n"))
		return exitUsage
	}
	if out.err != nil {
		return fail(stderr, cmd, out.err)
	}
	return exitOK
}

func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "smartgo admin %s: %v\n", cmd, err)
	return exitFailure
}

// parseTime accepts RFC 3339, unix milliseconds or a duration ago.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, errors.New("want RFC 3339, unix milliseconds or a duration such as 1h")
}

func fmtMillis(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// output renders results as an aligned table or as JSON.
type output struct {
	w    io.Writer
	json bool
	err  error
}

func (o *output) writeJSON(v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		o.err = err
		return
	}
	_, o.err = fmt.Fprintf(o.w, "%s\n", b)
}

func (o *output) table(v any, header []string, rows func(add func(...any))) {
	if o.json {
		o.writeJSON(v)
		return
	}
	tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	rows(func(cells ...any) {
		parts := make([]string, len(cells))
		for i, c := range cells {
			parts[i] = fmt.Sprint(c)
		}
		fmt.Fprintln(tw, strings.Join(parts, "\t"))
	})
	o.err = tw.Flush()
}

func (o *output) message(v any, text string) {
	if o.json {
		o.writeJSON(v)
		return
	}
	_, o.err = fmt.Fprintln(o.w, text)
}

type jsonMessage struct {
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	Topic          string            `json:"topic"`
	Broker         string            `json:"broker"`
	QueueID        int32             `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	Tags           string            `json:"tags,omitempty"`
	Keys           []string          `json:"keys,omitempty"`
	BornTimestamp  int64             `json:"bornTimestamp"`
	StoreTimestamp int64             `json:"storeTimestamp"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	Properties     map[string]string `json:"properties,omitempty"`
	Body           string            `json:"body"`
}

func (o *output) messages(msgs []*client.MessageExt) {
	js := make([]jsonMessage, 0, len(msgs))
	for _, m := range msgs {
		js = append(js, jsonMessage{MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, Topic: m.Topic, Broker: m.Queue.BrokerName,
			QueueID: m.Queue.QueueID, QueueOffset: m.QueueOffset, Tags: m.Tags, Keys: m.Keys, BornTimestamp: m.BornTimestamp,
			StoreTimestamp: m.StoreTimestamp, ReconsumeTimes: m.ReconsumeTimes, Properties: m.Properties, Body: string(m.Body)})
	}
	o.table(js, []string{"MSG_ID", "OFFSET_MSG_ID", "TOPIC", "QUEUE", "OFFSET", "TAGS", "KEYS", "STORED", "BODY"}, func(add func(...any)) {
		for _, m := range js {
			body := m.Body
			if len(body) > 48 {
				body = body[:45] + "..."
			}
			add(m.MsgID, m.OffsetMsgID, m.Topic, fmt.Sprintf("%s:%d", m.Broker, m.QueueID), m.QueueOffset, m.Tags,
				strings.Join(m.Keys, " "), fmtMillis(m.StoreTimestamp), strconv.Quote(body))
		}
	})
}
