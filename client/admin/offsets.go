package admin

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// OffsetReset is one queue's reset.
type OffsetReset struct {
	Queue     client.MessageQueue `json:"queue"`
	OldOffset int64               `json:"oldOffset"`
	NewOffset int64               `json:"newOffset"`
}

// ResetOffset moves a group's committed offset on every queue of topic to
// the first message stored at or after ts. Each master is asked with
// INVOKE_BROKER_TO_RESET_OFFSET (as mqadmin resetOffsetByTime, forced): it
// commits the new offsets and tells the group's online consumers, which
// drop what they hold and continue from there. A broker with no consumer of
// the group online (CONSUMER_NOT_ONLINE) gets the offsets written directly
// (SEARCH_OFFSET_BY_TIMESTAMP, then UPDATE_CONSUMER_OFFSET per queue). A
// group that no master knows is client.ErrGroupNotExist.
func (a *Admin) ResetOffset(ctx context.Context, group, topic string, ts time.Time) ([]OffsetReset, error) {
	rd, err := a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := a.checkGroup(ctx, group); err != nil {
		return nil, err
	}
	var out []OffsetReset
	for _, qd := range rd.QueueDatas {
		addr := ""
		for _, bd := range rd.BrokerDatas {
			if bd.BrokerName == qd.BrokerName {
				addr = bd.MasterAddr()
			}
		}
		if addr == "" {
			continue
		}
		olds := make([]int64, qd.ReadQueueNums)
		for q := range olds {
			olds[q] = -1
			if r, err := a.invoke(ctx, "query offset", addr, protocol.NewRequest(protocol.QueryConsumerOffset,
				&protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: int32(q)}, nil)); err == nil && r.Code == protocol.Success {
				var h protocol.OffsetResponseHeader
				if r.DecodeHeader(&h) == nil {
					olds[q] = h.Offset
				}
			}
		}
		news, err := a.resetOnline(ctx, addr, group, topic, ts)
		if err != nil {
			return out, err
		}
		for q := int32(0); q < qd.ReadQueueNums; q++ {
			mq := client.MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: q}
			off, ok := news[q]
			if news == nil { // nobody online: write the offset
				found, err := a.searchOffset(ctx, addr, topic, q, ts)
				if err != nil {
					return out, err
				}
				if _, err := a.invokeOK(ctx, "update offset", addr, protocol.NewRequest(protocol.UpdateConsumerOffset,
					&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: q, CommitOffset: found}, nil)); err != nil {
					return out, err
				}
				off, ok = found, true
			}
			if ok {
				out = append(out, OffsetReset{Queue: mq, OldOffset: olds[q], NewOffset: off})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queue.BrokerName != out[j].Queue.BrokerName {
			return out[i].Queue.BrokerName < out[j].Queue.BrokerName
		}
		return out[i].Queue.QueueID < out[j].Queue.QueueID
	})
	return out, nil
}

// OffsetByTime returns the first offset of queue mq whose message was
// stored at or after ts (the broker's clock), or the queue's max offset
// when none was: SEARCH_OFFSET_BY_TIMESTAMP to the queue's master.
func (a *Admin) OffsetByTime(ctx context.Context, mq client.MessageQueue, ts time.Time) (int64, error) {
	rd, err := a.TopicRoute(ctx, mq.Topic)
	if err != nil {
		return 0, err
	}
	for _, bd := range rd.BrokerDatas {
		if bd != nil && bd.BrokerName == mq.BrokerName && bd.MasterAddr() != "" {
			return a.searchOffset(ctx, bd.MasterAddr(), mq.Topic, mq.QueueID, ts)
		}
	}
	return 0, fmt.Errorf("%w: topic %s has no master of broker %q", client.ErrNoRoute, mq.Topic, mq.BrokerName)
}

// searchOffset asks the broker at addr for the first offset of a queue
// stored at or after ts (SEARCH_OFFSET_BY_TIMESTAMP).
func (a *Admin) searchOffset(ctx context.Context, addr, topic string, queueID int32, ts time.Time) (int64, error) {
	resp, err := a.invokeOK(ctx, "search offset", addr, protocol.NewRequest(protocol.SearchOffsetByTimestamp,
		&protocol.SearchOffsetRequestHeader{Topic: topic, QueueID: queueID, Timestamp: ts.UnixMilli()}, nil))
	if err != nil {
		return 0, err
	}
	defer resp.Recycle()
	var oh protocol.OffsetResponseHeader
	if err := resp.DecodeHeader(&oh); err != nil {
		return 0, fmt.Errorf("admin: search offset: %w", err)
	}
	return oh.Offset, nil
}

// resetOnline asks the broker at addr to reset group's offsets on topic
// to ts and tell its online consumers (INVOKE_BROKER_TO_RESET_OFFSET,
// forced); it returns the new offset per queue id, or nil when no consumer
// of the group is online there.
func (a *Admin) resetOnline(ctx context.Context, addr, group, topic string, ts time.Time) (map[int32]int64, error) {
	resp, err := a.invoke(ctx, "reset offset", addr, protocol.NewRequest(protocol.InvokeBrokerToResetOffset,
		&protocol.ResetOffsetRequestHeader{Topic: topic, Group: group, Timestamp: ts.UnixMilli(), IsForce: true}, nil))
	if err != nil {
		return nil, err
	}
	switch resp.Code {
	case protocol.ConsumerNotOnline:
		return nil, nil
	case protocol.Success:
	default:
		return nil, fmt.Errorf("admin: reset offset at %s: code %d: %s", addr, resp.Code, resp.Remark)
	}
	var body protocol.ResetOffsetBody
	if err := protocol.DecodeJSON(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("admin: reset offset at %s: %w", addr, err)
	}
	news := make(map[int32]int64, len(body.OffsetTable))
	for _, e := range body.OffsetTable {
		news[e.Queue.QueueID] = e.Value
	}
	return news, nil
}

// queueMaster returns the address of mq's master as the registries route
// it.
func (a *Admin) queueMaster(ctx context.Context, mq client.MessageQueue) (string, error) {
	rd, err := a.TopicRoute(ctx, mq.Topic)
	if err != nil {
		return "", err
	}
	for _, bd := range rd.BrokerDatas {
		if bd != nil && bd.BrokerName == mq.BrokerName {
			if addr := bd.MasterAddr(); addr != "" {
				return addr, nil
			}
		}
	}
	return "", fmt.Errorf("%w: topic %s has no master on broker %q", client.ErrNoRoute, mq.Topic, mq.BrokerName)
}

// GroupOffset returns group's committed offset of mq as the queue's
// master stores it, -1 when the group committed none there.
func (a *Admin) GroupOffset(ctx context.Context, group string, mq client.MessageQueue) (int64, error) {
	addr, err := a.queueMaster(ctx, mq)
	if err != nil {
		return 0, err
	}
	h := &protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: mq.Topic, QueueID: mq.QueueID,
		HasSetZeroIfNotFound: true}
	resp, err := a.invoke(ctx, "query offset", addr, protocol.NewRequest(protocol.QueryConsumerOffset, h, nil))
	if err != nil {
		return 0, err
	}
	switch resp.Code {
	case protocol.Success:
		var oh protocol.OffsetResponseHeader
		if err := resp.DecodeHeader(&oh); err != nil {
			return 0, fmt.Errorf("admin: query offset response from %s: %w", addr, err)
		}
		return oh.Offset, nil
	case protocol.QueryNotFound:
		return -1, nil
	}
	return 0, okAnswer("query offset", addr, resp)
}

// CommitGroupOffset stores off as group's committed offset of mq on the
// queue's master (as a consumer's commit does: it replaces the offset).
func (a *Admin) CommitGroupOffset(ctx context.Context, group string, mq client.MessageQueue, off int64) error {
	addr, err := a.queueMaster(ctx, mq)
	if err != nil {
		return err
	}
	_, err = a.invokeOK(ctx, "commit offset", addr, protocol.NewRequest(protocol.UpdateConsumerOffset,
		&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: mq.Topic, QueueID: mq.QueueID, CommitOffset: off}, nil))
	return err
}
