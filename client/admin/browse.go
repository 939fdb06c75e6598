package admin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Calls the web console uses beside the CLI's: every topic's and group's
// configuration in one call per broker, a group's members, messages read
// by queue offset, and re-delivery of a message to one consumer group.

// TopicOnBroker is a topic's queues and permission on one broker group.
type TopicOnBroker struct {
	Broker      string `json:"broker"`
	ReadQueues  int32  `json:"readQueues"`
	WriteQueues int32  `json:"writeQueues"`
	Perm        int32  `json:"perm"`
}

// TopicInfo is a topic's configuration on every broker group that has it.
type TopicInfo struct {
	Name    string          `json:"name"`
	Order   bool            `json:"order"`
	System  bool            `json:"system"` // a retry, dead-letter or other topic the brokers create themselves
	Brokers []TopicOnBroker `json:"brokers"`
}

// systemTopic reports the topics SmartGo and RocketMQ create themselves
// under fixed names (TopicConfigs adds those named after clusters and
// broker groups).
func systemTopic(name string) bool {
	for _, p := range []string{"%RETRY%", "%DLQ%", "%SYS_", "RMQ_SYS_", "SCHEDULE_TOPIC", "TBW102", "MQTT_", "SMARTGO_", "$"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	switch name {
	case "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "TRANS_CHECK_MAX_TIME_TOPIC":
		return true
	}
	return false
}

// brokerTopics returns the topics every broker creates for its cluster
// and broker group: one named after each (routes by cluster or broker
// name, as RocketMQ's) and the cluster's reply topic (request-reply).
func brokerTopics(brokers []Broker) map[string]bool {
	out := make(map[string]bool, 3*len(brokers))
	for _, b := range brokers {
		out[b.Name] = true
		if b.Cluster != "" {
			out[b.Cluster] = true
			out[protocol.ReplyTopic(b.Cluster)] = true
		}
	}
	return out
}

// TopicConfigs returns every topic of every broker group
// (GET_ALL_TOPIC_CONFIG to each group's master, or to a slave while it has
// none: see Readers), sorted by name. Broker groups that do not answer
// leave their topics out: the answer then comes with an ErrPartial error
// naming them (an error alone when none answered).
func (a *Admin) TopicConfigs(ctx context.Context) ([]TopicInfo, error) {
	readers, err := a.Readers(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*TopicInfo{}
	own := brokerTopics(readers)
	perr := a.fromEach(ctx, "topic configs", readers, func() *protocol.Command {
		return protocol.NewRequest(protocol.GetAllTopicConfig, nil, nil)
	}, func(m Broker, resp *protocol.Command) error {
		if err := okAnswer("topic configs", m.Addr, resp); err != nil {
			return err
		}
		var w protocol.TopicConfigSerializeWrapper
		if err := protocol.DecodeJSON(resp.Body, &w); err != nil {
			return fmt.Errorf("admin: topic configs of %s: %w", m.Name, err)
		}
		for name, tc := range w.TopicConfigTable {
			ti := byName[name]
			if ti == nil {
				ti = &TopicInfo{Name: name, Order: tc.Order, System: systemTopic(name) || own[name]}
				byName[name] = ti
			}
			ti.Brokers = append(ti.Brokers, TopicOnBroker{Broker: m.Name, ReadQueues: tc.ReadQueueNums, WriteQueues: tc.WriteQueueNums, Perm: tc.Perm})
		}
		return nil
	})
	if perr != nil && !errors.Is(perr, ErrPartial) {
		return nil, perr
	}
	out := make([]TopicInfo, 0, len(byName))
	for _, ti := range byName {
		sort.Slice(ti.Brokers, func(i, j int) bool { return ti.Brokers[i].Broker < ti.Brokers[j].Broker })
		out = append(out, *ti)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, perr
}

// GroupInfo is a consumer group's configuration on the broker groups that
// know it.
type GroupInfo struct {
	Name          string   `json:"name"`
	Brokers       []string `json:"brokers"`
	ConsumeEnable bool     `json:"consumeEnable"`
	Broadcast     bool     `json:"broadcast"`
	RetryMaxTimes int32    `json:"retryMaxTimes"`
	System        bool     `json:"system"`
}

// Groups returns every subscription group of every broker group
// (GET_ALL_SUBSCRIPTIONGROUP_CONFIG, to the brokers Readers names), sorted
// by name; broker groups that do not answer make it ErrPartial, as
// TopicConfigs.
func (a *Admin) Groups(ctx context.Context) ([]GroupInfo, error) {
	readers, err := a.Readers(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*GroupInfo{}
	perr := a.fromEach(ctx, "group configs", readers, func() *protocol.Command {
		return protocol.NewRequest(protocol.GetAllSubscriptionGroupConfig, nil, nil)
	}, func(m Broker, resp *protocol.Command) error {
		if err := okAnswer("group configs", m.Addr, resp); err != nil {
			return err
		}
		var w protocol.SubscriptionGroupWrapper
		if err := protocol.DecodeJSON(resp.Body, &w); err != nil {
			return fmt.Errorf("admin: group configs of %s: %w", m.Name, err)
		}
		for name, g := range w.SubscriptionGroupTable {
			gi := byName[name]
			if gi == nil {
				gi = &GroupInfo{Name: name, ConsumeEnable: g.ConsumeEnable, Broadcast: g.ConsumeBroadcastEnable,
					RetryMaxTimes: g.RetryMaxTimes, System: systemTopic(name) || strings.HasPrefix(name, "TOOLS_") || strings.HasPrefix(name, "CID_RMQ_SYS")}
				byName[name] = gi
			}
			gi.Brokers = append(gi.Brokers, m.Name)
		}
		return nil
	})
	if perr != nil && !errors.Is(perr, ErrPartial) {
		return nil, perr
	}
	out := make([]GroupInfo, 0, len(byName))
	for _, gi := range byName {
		sort.Strings(gi.Brokers)
		out = append(out, *gi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, perr
}

// GroupMember is one consumer client of a group, as a broker sees it.
type GroupMember struct {
	ClientID      string            `json:"clientId"`
	Addr          string            `json:"addr"`
	Language      string            `json:"language"`
	Version       int32             `json:"version"`
	Broker        string            `json:"broker"`
	Subscriptions map[string]string `json:"subscriptions"` // topic -> expression
}

// GroupMembers returns the online members of a group on every broker
// group (GET_CONSUMER_CONNECTION_LIST to the brokers Readers names); none
// when the group is offline. Broker groups that do not answer make it
// ErrPartial, as TopicConfigs.
func (a *Admin) GroupMembers(ctx context.Context, group string) ([]GroupMember, error) {
	readers, err := a.Readers(ctx)
	if err != nil {
		return nil, err
	}
	var out []GroupMember
	seen := map[string]bool{}
	perr := a.fromEach(ctx, "consumer connections", readers, func() *protocol.Command {
		return protocol.NewRequest(protocol.GetConsumerConnectionList, &protocol.ConsumerGroupHeader{ConsumerGroup: group}, nil)
	}, func(m Broker, resp *protocol.Command) error {
		if resp.Code == protocol.ConsumerNotOnline {
			return nil
		}
		if err := okAnswer("consumer connections", m.Addr, resp); err != nil {
			return err
		}
		var cc protocol.ConsumerConnection
		if err := protocol.DecodeJSON(resp.Body, &cc); err != nil {
			return fmt.Errorf("admin: consumer connections: %w", err)
		}
		subs := map[string]string{}
		for t, sd := range cc.SubscriptionTable {
			if sd != nil {
				subs[t] = sd.SubString
			}
		}
		for _, c := range cc.ConnectionSet {
			if c == nil || seen[c.ClientID] {
				continue
			}
			seen[c.ClientID] = true
			out = append(out, GroupMember{ClientID: c.ClientID, Addr: c.ClientAddr, Language: c.Language, Version: c.Version,
				Broker: m.Name, Subscriptions: subs})
		}
		return nil
	})
	if perr != nil && !errors.Is(perr, ErrPartial) {
		return nil, perr
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out, perr
}

// ToolsGroup is the consumer group BrowseMessages pulls with (it never
// commits an offset).
const ToolsGroup = "TOOLS_CONSUMER"

// MaxBrowse bounds the messages one BrowseMessages call returns.
const MaxBrowse = 256

// BrowseMessages reads up to max messages of one queue starting at a
// queue offset, without committing anything; it also returns the offset
// after the last message read and the queue's min and max offsets.
func (a *Admin) BrowseMessages(ctx context.Context, topic, brokerName string, queueID int32, offset int64, max int) (msgs []*client.MessageExt, next, minOff, maxOff int64, err error) {
	if max <= 0 || max > MaxBrowse {
		return nil, 0, 0, 0, fmt.Errorf("%w: count %d outside 1..%d", client.ErrBadOptions, max, MaxBrowse)
	}
	if offset < 0 || queueID < 0 {
		return nil, 0, 0, 0, fmt.Errorf("%w: negative queue or offset", client.ErrBadOptions)
	}
	rd, addr, err := a.browseAddr(ctx, topic, brokerName)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	for _, qd := range rd.QueueDatas {
		if qd != nil && qd.BrokerName == brokerName && queueID >= qd.ReadQueueNums {
			// The broker would refuse it as a system error.
			return nil, 0, 0, 0, fmt.Errorf("%w: topic %s has %d read queues on broker %q, no queue %d",
				client.ErrNoRoute, topic, qd.ReadQueueNums, brokerName, queueID)
		}
	}
	h := &protocol.PullMessageRequestHeader{ConsumerGroup: ToolsGroup, Topic: topic, QueueID: queueID, QueueOffset: offset,
		MaxMsgNums: int32(max), SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
	resp, err := a.invoke(ctx, "browse", addr, protocol.NewRequest(protocol.PullMessage, h, nil))
	if err == nil && resp.Code == protocol.SubscriptionGroupNotExist {
		// The broker does not create groups by itself: make the tools group.
		if err = a.putGroup(ctx, addr, GroupConfig{Name: ToolsGroup}); err == nil {
			resp, err = a.invoke(ctx, "browse", addr, protocol.NewRequest(protocol.PullMessage, h, nil))
		}
	}
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer resp.Recycle()
	switch resp.Code {
	case protocol.Success, protocol.PullNotFound, protocol.PullOffsetMoved, protocol.PullRetryImmediately:
	default:
		return nil, 0, 0, 0, &client.BrokerError{Addr: addr, Op: "browse", Code: resp.Code, Remark: resp.Remark}
	}
	var rh protocol.PullMessageResponseHeader
	if err := resp.DecodeHeader(&rh); err != nil {
		return nil, 0, 0, 0, fmt.Errorf("admin: browse: %w", err)
	}
	if resp.Code == protocol.Success {
		if msgs, err = client.DecodeMessages(resp.Body, brokerName); err != nil {
			return nil, 0, 0, 0, err
		}
		for _, m := range msgs {
			m.Queue = client.MessageQueue{Topic: topic, BrokerName: brokerName, QueueID: queueID}
		}
	}
	return msgs, rh.NextBeginOffset, rh.MinOffset, rh.MaxOffset, nil
}

// browseAddr returns topic's route and the address BrowseMessages reads
// brokerName's queues from: its master, or a slave while there is none.
func (a *Admin) browseAddr(ctx context.Context, topic, brokerName string) (*protocol.TopicRouteData, string, error) {
	rd, err := a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, "", err
	}
	addr := ""
	for _, bd := range rd.BrokerDatas {
		if bd.BrokerName == brokerName {
			addr = readAddr(bd)
		}
	}
	if addr == "" {
		return nil, "", fmt.Errorf("%w: topic %s has no broker %q", client.ErrNoRoute, topic, brokerName)
	}
	return rd, addr, nil
}

// ErrNotIndexed: the broker has stored messages it has not indexed yet
// (its consume queues do not reach its commitlog's end), so a browse does
// not find them. A broker restarted after a crash on a full disk indexes
// its last records only once space frees.
var ErrNotIndexed = errors.New("admin: the broker has not indexed every message it stored")

// WaitIndexed waits until the broker BrowseMessages reads topic's queues
// of brokerName from has indexed every message it had stored when
// WaitIndexed was called: a browse after it returns nil finds them all.
// It reads the broker's runtime statistics (commitLogMaxOffset, and
// dispatchBehindBytes: how much of the log is not indexed) until the
// indexed offset reaches the log's end of the first reading. When ctx
// ends first it returns an error matching ErrNotIndexed and ctx's error.
func (a *Admin) WaitIndexed(ctx context.Context, topic, brokerName string) error {
	_, addr, err := a.browseAddr(ctx, topic, brokerName)
	if err != nil {
		return err
	}
	target, indexed := int64(-1), int64(-1)
	notIndexed := func() error {
		return fmt.Errorf("%w: %s indexed its log up to offset %d of %d: %w", ErrNotIndexed, addr, indexed, target, ctx.Err())
	}
	for {
		kv, err := a.BrokerRuntimeInfo(ctx, addr)
		if err != nil && target >= 0 && ctx.Err() != nil {
			return notIndexed() // the time ran out during a reading
		}
		if err != nil {
			return fmt.Errorf("admin: wait until %s indexed its log: %w", addr, err)
		}
		end, err1 := strconv.ParseInt(kv["commitLogMaxOffset"], 10, 64)
		behind, err2 := strconv.ParseInt(kv["dispatchBehindBytes"], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("admin: wait until %s indexed its log: runtime info: %w", addr, err)
		}
		if target < 0 {
			target = end
		}
		if indexed = end - behind; indexed >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			return notIndexed()
		case <-time.After(10 * time.Millisecond): // the broker has no wake-up for this: ask again
		}
	}
}

// putGroup writes a consumer group's config on the broker at addr.
func (a *Admin) putGroup(ctx context.Context, addr string, g GroupConfig) error {
	body, err := protocol.EncodeJSON(g.subscriptionConfig())
	if err != nil {
		return err
	}
	_, err = a.invokeOK(ctx, "create group", addr, protocol.NewRequest(protocol.UpdateAndCreateSubscriptionGroup, nil, body))
	return err
}

// ResendToGroup re-delivers a stored message (by its offset message id) to
// one consumer group: the broker holding it copies it to the group's
// retry topic with a one-second delay (CONSUMER_SEND_MSG_BACK, delay level
// 1), so only that group's consumers receive it again, with its original
// topic; a dead letter (from %DLQ%<group>) too. The group must exist.
// The send-back goes to the master of the broker group whose log holds
// the message (sendBackTarget), whichever broker its id names.
func (a *Admin) ResendToGroup(ctx context.Context, offsetMsgID, group string) error {
	if group == "" {
		return fmt.Errorf("%w: empty group", client.ErrBadOptions)
	}
	host, off, err := record.ParseOffsetMessageID(offsetMsgID)
	if err != nil {
		return fmt.Errorf("%w: %w", client.ErrBadMessage, err)
	}
	if err := a.checkGroup(ctx, group); err != nil {
		return err
	}
	m, replicaOf, err := a.messageByID(ctx, offsetMsgID)
	if err != nil {
		return err
	}
	target, err := a.sendBackTarget(ctx, host.String(), replicaOf, offsetMsgID)
	if err != nil {
		return err
	}
	if err := a.targetGroup(ctx, target, group); err != nil {
		return err
	}
	// The limit of this send-back is one more attempt than the message has
	// had: a dead letter (or a message retried as often as the group
	// allows) would otherwise go straight back to %DLQ%<group>. A consumer
	// failing it again sends it back under its own limit, to the DLQ.
	h := &protocol.ConsumerSendMsgBackRequestHeader{Offset: off, Group: group, DelayLevel: 1, OriginMsgID: m.MsgID, OriginTopic: m.Topic,
		MaxReconsumeTimes: m.ReconsumeTimes + 1, HasMaxReconsumeTimes: true}
	_, err = a.invokeOK(ctx, "resend", target, protocol.NewRequest(protocol.ConsumerSendMsgBack, h, nil))
	switch {
	case errors.Is(err, client.ErrGroupNotExist):
		return fmt.Errorf("%w: %s", client.ErrGroupNotExist, group)
	case errors.Is(err, client.ErrTimeout):
		// A broker does not answer a send-back it cannot carry out, so
		// that consumers keep the message (broker.processSendBack).
		return fmt.Errorf("%w (a broker leaves a send-back it cannot store unanswered: is its disk full or are its writes refused?)", err)
	}
	return err
}

// ErrRetriesDisabled: the group's retries are disabled on the broker
// (retryQueueNums 0), which answers a send-back for it as done and drops
// the message, so a resend to that group would deliver nothing.
var ErrRetriesDisabled = errors.New("admin: the group's retries are disabled (retryQueueNums 0)")

// targetGroup checks group on the broker at addr, which is to take the
// resend: ErrRetriesDisabled when its config of group has no retry queue;
// client.ErrGroupNotExist when it has no config of group and does not
// create groups on first use (autoCreateSubscriptionGroup false): such a
// broker leaves the send-back unanswered (as every send-back it cannot
// carry out), so the resend would only time out. A broker that does not
// say (an error) is left to the send-back itself.
func (a *Admin) targetGroup(ctx context.Context, addr, group string) error {
	resp, err := a.invoke(ctx, "group configs", addr, protocol.NewRequest(protocol.GetAllSubscriptionGroupConfig, nil, nil))
	if err != nil || resp.Code != protocol.Success {
		return nil
	}
	var w protocol.SubscriptionGroupWrapper
	if protocol.DecodeJSON(resp.Body, &w) != nil {
		return nil
	}
	g, ok := w.SubscriptionGroupTable[group]
	if ok && g.RetryQueueNums <= 0 {
		return fmt.Errorf("%w: group %s on %s: the broker would take the resend as done and drop it", ErrRetriesDisabled, group, addr)
	}
	if !ok {
		if kv, err := a.BrokerConfig(ctx, addr); err == nil && kv["autoCreateSubscriptionGroup"] == "false" {
			return fmt.Errorf("%w: %s on %s, the broker holding the message, which does not create groups on first use "+
				"(autoCreateSubscriptionGroup false): create the group there (smartgo admin group create -g %s) and resend",
				client.ErrGroupNotExist, group, addr, group)
		}
	}
	return nil
}

// sendBackTarget is the broker that takes the send-back of the record
// whose id names addr: addr while it is its group's master (or unknown),
// else that group's master. A slave leaves a send-back it cannot store
// unanswered, and the broker an id names may be a slave now (after a
// failover it serves again as its group's slave, with the same log), or
// gone (replicaOf names the group whose replica holds the record then):
// the group's logs hold the record at the same offset.
func (a *Admin) sendBackTarget(ctx context.Context, addr, replicaOf, offsetMsgID string) (string, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		if replicaOf == "" {
			return addr, nil // the broker the id names answered: try it
		}
		return "", err
	}
	group := replicaOf
	if group == "" {
		for name, bd := range ci.BrokerAddrTable {
			for id, at := range bd.BrokerAddrs {
				if at == addr && id != protocol.MasterID {
					group = name
				}
			}
		}
		if group == "" {
			return addr, nil // a master, or not listed
		}
	}
	bd := ci.BrokerAddrTable[group]
	if bd == nil || bd.MasterAddr() == "" {
		return "", fmt.Errorf("%w: message %s is on broker group %s, which has no master now", client.ErrBrokerUnavailable, offsetMsgID, group)
	}
	return bd.MasterAddr(), nil
}

// RegistryState is one registry's answer to a cluster info request.
type RegistryState struct {
	Addr    string `json:"addr"`
	OK      bool   `json:"ok"`
	Brokers int    `json:"brokers"` // broker groups it knows
	Err     string `json:"error,omitempty"`
}

// Registries asks every configured registry for its cluster table and
// reports which answered and how many broker groups each knows.
func (a *Admin) Registries(ctx context.Context) []RegistryState {
	out := make([]RegistryState, len(a.opts.Registries))
	var wg sync.WaitGroup
	for i, r := range a.opts.Registries {
		wg.Add(1)
		go func(st *RegistryState) { // at once: a hung one costs the others nothing
			defer wg.Done()
			st.Addr = r
			resp, err := a.invokeOK(ctx, "cluster info", r, protocol.NewRequest(protocol.GetBrokerClusterInfo, nil, nil))
			if err != nil {
				st.Err = err.Error()
				return
			}
			var ci protocol.ClusterInfo
			if err := protocol.DecodeJSON(resp.Body, &ci); err != nil {
				st.Err = err.Error()
				return
			}
			st.OK, st.Brokers = true, len(ci.BrokerAddrTable)
		}(&out[i])
	}
	wg.Wait()
	return out
}
