package broker

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// PullSysFlag bits of PULL_MESSAGE.
const (
	pullFlagCommitOffset = 0x1
	pullFlagSuspend      = 0x2
	pullFlagSubscription = 0x4
)

// MasterID is the broker id of a group's master.
const MasterID = 0

// processPull serves PULL_MESSAGE. A pull that finds nothing new and allows
// suspension is held until the queue grows or the hold times out; its
// response is then written by the hold service.
func (b *Broker) processPull(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	resp := b.pull(c, req, true)
	if resp != nil && resp.Code != protocol.Success && resp.Code != protocol.PullNotFound && b.log.Enabled(context.Background(), slog.LevelDebug) {
		f := req.Fields()
		b.log.Debug("pull refused", "peer", c.RemoteAddr().String(), "code", resp.Code, "remark", resp.Remark,
			"group", f["consumerGroup"], "topic", f["topic"], "queue", f["queueId"])
	}
	return resp, nil
}

// pull runs one pull. allowSuspend is false when a held pull is re-run.
// A nil return means the pull is held.
func (b *Broker) pull(c *remoting.Conn, req *protocol.Command, allowSuspend bool) *protocol.Command {
	var h protocol.PullMessageRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad pull header: %v", err)
	}
	if b.perm.Load()&PermRead == 0 {
		return errResp(protocol.NoPermission, "the broker[%s] pulling message is forbidden", b.addr)
	}
	if b.isSlave() && !b.slaveRead.Load() && b.masterReachable() {
		// Reads belong to the master while it is up: send the consumer back.
		out := protocol.NewResponse(protocol.PullRetryImmediately, "the slave does not serve reads while its master is up (slave_read_enable = false)")
		out.SetHeader(&protocol.PullMessageResponseHeader{NextBeginOffset: h.QueueOffset, MinOffset: b.store.MinOffset(h.Topic, h.QueueID),
			MaxOffset: b.store.MaxOffset(h.Topic, h.QueueID), SuggestWhichBrokerID: MasterID})
		return out
	}
	g, err := b.groups.FindOrCreate(h.ConsumerGroup)
	if err != nil {
		return errResp(protocol.SubscriptionGroupNotExist, "subscription group [%s] does not exist: %v", h.ConsumerGroup, err)
	}
	if !g.ConsumeEnable {
		return errResp(protocol.NoPermission, "subscription group no permission, %s", h.ConsumerGroup)
	}
	tc, ok := b.readableTopic(h.Topic)
	if !ok {
		return errResp(protocol.TopicNotExist, "topic[%s] not exist, apply first please!", h.Topic)
	}
	if tc.Perm&PermRead == 0 {
		return errResp(protocol.NoPermission, "the topic[%s] pulling message is forbidden", h.Topic)
	}
	if h.QueueID < 0 || h.QueueID >= tc.ReadQueueNums {
		return errResp(protocol.SystemError, "queueId[%d] is illegal, topic:[%s] topicConfig.readQueueNums:[%d] consumer:[%s]",
			h.QueueID, h.Topic, tc.ReadQueueNums, peerAddr(c))
	}
	// RocketMQ serves at least one message whatever maxMsgNums says, and
	// rocketmq-client-go's pull consumer (Poll) sends 0 unless its
	// application set a batch size: read a non-positive count as 1.
	maxMsgs := max(int(h.MaxMsgNums), 1)
	// A group that refuses broadcasting refuses the pulls of its
	// broadcasting members, whether or not their pulls carry the
	// subscription (SmartGo's SDK's do).
	if !g.ConsumeBroadcastEnable && b.consumers.MessageModel(h.ConsumerGroup, c) == protocol.MessageModelBroadcasting {
		return errResp(protocol.NoPermission, "the consumer group[%s] can not consume by broadcast way", h.ConsumerGroup)
	}
	filter, recFilter, resp := b.pullFilter(&h)
	if resp != nil {
		return resp
	}

	t0 := time.Now()
	res, err := b.store.GetMessagesFiltered(h.Topic, h.QueueID, h.QueueOffset, maxMsgs, filter, recFilter)
	if err != nil {
		return errResp(protocol.SystemError, "read %s:%d at %d: %v", h.Topic, h.QueueID, h.QueueOffset, err)
	}
	b.rt.observeGet(len(res.Buffers), time.Since(t0))
	hdr := protocol.PullMessageResponseHeader{
		NextBeginOffset: res.NextBeginOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset, SuggestWhichBrokerID: MasterID,
	}
	if res.Status == store.GetOffsetOverflowBadly && !b.isSlave() {
		// An offset past the queue's end on a master: the log lost the
		// tail the group had consumed (a crash under async flush, a
		// damaged or cut segment) and the queue's offsets were given again
		// to messages stored since. Moving the group to the end would skip
		// those: move it to the first one stored since this broker became
		// master (started, or was promoted: a promoted slave's records
		// from before came from the old master, whose tail it lacks).
		hdr.NextBeginOffset = min(hdr.NextBeginOffset, b.store.OffsetByPhysical(h.Topic, h.QueueID, b.masterFrom.Load()))
	}
	if res.SuggestSlave && b.slaveRead.Load() {
		hdr.SuggestWhichBrokerID = g.WhichBrokerWhenConsumeSlowly
	}
	code := pullCode(res.Status, h.QueueOffset)
	out := protocol.NewResponse(code, res.Status.String())
	out.WithHeader(&hdr)
	if code == protocol.Success {
		var bytes int64
		for _, buf := range res.Buffers {
			bytes += int64(len(buf))
		}
		b.stats.AddGet(h.ConsumerGroup, h.Topic, int64(len(res.Buffers)), bytes)
		out.BodyBuffers = res.Buffers
		out.Release = res.Release
	} else {
		res.Release()
	}

	// The piggy-backed commit counts once, on the first execution.
	if allowSuspend && h.SysFlag&pullFlagCommitOffset != 0 && !b.isSlave() {
		b.offsets.Commit(h.ConsumerGroup, h.Topic, h.QueueID, h.CommitOffset)
	}
	if code == protocol.PullNotFound && allowSuspend && h.SysFlag&pullFlagSuspend != 0 {
		hold := b.opts.ShortPollingHold
		if b.opts.LongPolling {
			hold = time.Duration(h.SuspendTimeoutMillis) * time.Millisecond
			if hold <= 0 || hold > 5*time.Minute {
				hold = 15 * time.Second
			}
		}
		fire := func(bool) {
			if r := b.pull(c, req, false); r != nil {
				_ = c.WriteResponse(req, r)
			}
		}
		// The pull outlives its recycling (this processor returns nil):
		// its header, decoded again when it fires, is a copy
		// (protocol.Command.Recycle), and the hold service keeps no
		// string of h (Hold copies the topic, Notify keeps none).
		req.OwnFields()
		if b.hold.Hold(h.Topic, h.QueueID, h.QueueOffset, b.now().Add(hold), fire) {
			// A message may have arrived between the read and the hold:
			// re-check so it is not missed until the timeout.
			if maxOff := b.store.MaxOffset(h.Topic, h.QueueID); maxOff > h.QueueOffset {
				b.hold.Notify(h.Topic, h.QueueID, maxOff)
			}
			return nil
		}
	}
	return out
}

// pullFilter resolves the subscription of a pull: from the request when it
// carries one (flag 0x4), else from the group's heartbeats. A SQL92
// subscription also filters records (sqlfilter.go).
func (b *Broker) pullFilter(h *protocol.PullMessageRequestHeader) (store.TagFilter, store.RecordFilter, *protocol.Command) {
	if h.SysFlag&pullFlagSubscription != 0 {
		if !isTagType(h.ExpressionType) {
			return b.sqlFilters(&protocol.SubscriptionData{Topic: h.Topic, SubString: h.Subscription, ExpressionType: h.ExpressionType})
		}
		return tagFilter(tagCodes(parseTags(h.Subscription))), nil, nil
	}
	info, ok := b.consumers.Group(h.ConsumerGroup)
	if !ok {
		return nil, nil, errResp(protocol.SubscriptionNotExist, "the consumer's group info not exist")
	}
	sub, ok := info.Subscriptions[h.Topic]
	if !ok {
		return nil, nil, errResp(protocol.SubscriptionNotExist, "the consumer's subscription not exist")
	}
	if sub.SubVersion < h.SubVersion {
		return nil, nil, errResp(protocol.SubscriptionNotLatest, "the consumer's subscription not latest")
	}
	if !isTagType(sub.ExpressionType) {
		return b.sqlFilters(&sub)
	}
	if sub.SubString == "" || sub.SubString == protocol.SubscriptionAll {
		return nil, nil, nil
	}
	codes := make([]int64, 0, len(sub.CodeSet))
	for _, c := range sub.CodeSet {
		codes = append(codes, int64(c))
	}
	if len(codes) == 0 {
		codes = tagCodes(parseTags(sub.SubString))
	}
	return tagFilter(codes), nil, nil
}

// parseTags splits a tag expression ("*", "TagA || TagB") into its tags;
// nil means all.
func parseTags(expr string) []string {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == protocol.SubscriptionAll {
		return nil
	}
	var tags []string
	for _, t := range strings.Split(expr, "||") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

func tagCodes(tags []string) []int64 {
	if len(tags) == 0 {
		return nil
	}
	codes := make([]int64, len(tags))
	for i, t := range tags {
		codes[i] = record.TagsHash(t)
	}
	return codes
}

func tagFilter(codes []int64) store.TagFilter {
	if len(codes) == 0 {
		return nil
	}
	return store.TagSet(codes).Match
}

// pullCode maps a store read status to the pull response code (protocol
// section 2.4).
func pullCode(s store.GetStatus, offset int64) int32 {
	switch s {
	case store.GetFound:
		return protocol.Success
	case store.GetNoMessageInQueue, store.GetNoMatchedLogicQueue:
		if offset != 0 {
			return protocol.PullOffsetMoved
		}
		return protocol.PullNotFound
	case store.GetOffsetTooSmall, store.GetOffsetOverflowBadly:
		return protocol.PullOffsetMoved
	case store.GetOffsetOverflowOne, store.GetOffsetFoundNull:
		return protocol.PullNotFound
	case store.GetNoMatchedMessage, store.GetMessageWasRemoving:
		return protocol.PullRetryImmediately
	default:
		return protocol.SystemError
	}
}

// readableTopic returns the configuration of a topic to read. A slave also
// serves topics it has replicated data for but whose configuration it has
// not copied from the master yet (that copy runs every few seconds, and
// the master may die in between): their queues are derived from the store.
func (b *Broker) readableTopic(topic string) (protocol.TopicConfig, bool) {
	if tc, ok := b.topics.Get(topic); ok || !b.isSlave() {
		return tc, ok
	}
	ids := b.store.QueueIDs(topic)
	if len(ids) == 0 {
		return protocol.TopicConfig{}, false
	}
	n := slices.Max(ids) + 1
	return protocol.TopicConfig{TopicName: topic, ReadQueueNums: n, WriteQueueNums: n, Perm: PermRW,
		TopicFilterType: protocol.TopicFilterSingleTag}, true
}
