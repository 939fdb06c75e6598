package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// ErrShareStartNotSupported marks a broker that does not know
// START_SHARE_GROUP (an older SmartGo, or another RocketMQ broker):
// StartShareGroup started the group there with ordinary requests instead
// (shareStartFallback).
var ErrShareStartNotSupported = errors.New("admin: broker does not support START_SHARE_GROUP")

// StartShareGroup starts group on topic at each broker group's master
// (START_SHARE_GROUP, SmartGo's own; protocol/sharestart.go has the rule):
// with restart, at the queues' ends unless a member of the group or
// another starter relies on its offsets; otherwise where it has none. The
// broker decides each topic's queues in one step. starter names this start
// (the same for all its topics). It returns every queue's offset after the
// decision; a broker group without a master is left out.
//
// A master that answers REQUEST_CODE_NOT_SUPPORTED (a broker that
// predates the request) is started with the ordinary offset requests
// instead (shareStartFallback): the same rule but for the starts of other
// starters, which such a broker does not keep.
func (a *Admin) StartShareGroup(ctx context.Context, group, topic, starter string, restart bool) (map[client.MessageQueue]int64, error) {
	body, err := protocol.EncodeJSON(protocol.StartShareGroupRequest{Group: group, Topic: topic, Starter: starter, Restart: restart})
	if err != nil {
		return nil, fmt.Errorf("admin: start share group: %w", err)
	}
	rd, err := a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[client.MessageQueue]int64{}
	for _, bd := range rd.BrokerDatas {
		addr := bd.MasterAddr()
		if addr == "" {
			continue
		}
		resp, err := a.invoke(ctx, "start share group", addr, protocol.NewRequest(protocol.StartShareGroup, nil, body))
		if err != nil {
			return nil, err
		}
		var offs map[int32]int64
		switch resp.Code {
		case protocol.Success:
			var r protocol.StartShareGroupResponse
			if err := protocol.DecodeJSON(resp.Body, &r); err != nil {
				return nil, fmt.Errorf("admin: start share group: %w", err)
			}
			offs = r.Offsets
		case protocol.RequestCodeNotSupported:
			if offs, err = a.shareStartFallback(ctx, addr, group, topic, restart); err != nil {
				return nil, fmt.Errorf("%w at %s, and starting the group with offset requests failed: %w", ErrShareStartNotSupported, addr, err)
			}
		default:
			return nil, okAnswer("start share group", addr, resp)
		}
		for q, off := range offs {
			out[client.MessageQueue{Topic: topic, BrokerName: bd.BrokerName, QueueID: q}] = off
		}
	}
	return out, nil
}

// shareStartFallback starts group on topic at the broker at addr with the
// requests every RocketMQ broker serves: per queue of the topic there
// (GET_TOPIC_STATS_INFO), a stored offset (GET_ALL_CONSUMER_OFFSET: a
// QUERY_CONSUMER_OFFSET answers 0 for a young queue without one) is kept
// unless restart and no member of the group is connected to the broker
// (GET_CONSUMER_LIST_BY_GROUP); otherwise the queue's max offset is
// written (UPDATE_CONSUMER_OFFSET). Unlike START_SHARE_GROUP these are not
// one step: two nodes restarting the same group at the same moment may
// each move it to their own ends, the later one skipping what was
// published between the two.
func (a *Admin) shareStartFallback(ctx context.Context, addr, group, topic string, restart bool) (map[int32]int64, error) {
	resp, err := a.invokeOK(ctx, "topic stats", addr, protocol.NewRequest(protocol.GetTopicStatsInfo, &protocol.TopicHeader{Topic: topic}, nil))
	if err != nil {
		return nil, err
	}
	var ts protocol.TopicStatsTable
	if err := protocol.DecodeJSON(resp.Body, &ts); err != nil {
		return nil, fmt.Errorf("admin: topic stats of %s: %w", addr, err)
	}
	relied := false
	if restart {
		resp, err := a.invoke(ctx, "consumer list", addr, protocol.NewRequest(protocol.GetConsumerListByGroup,
			&protocol.ConsumerGroupHeader{ConsumerGroup: group}, nil))
		if err != nil {
			return nil, err
		}
		if resp.Code == protocol.Success {
			var ids protocol.ConsumerIDList
			if err := protocol.DecodeJSON(resp.Body, &ids); err != nil {
				return nil, fmt.Errorf("admin: consumer list of %s: %w", addr, err)
			}
			relied = len(ids.ConsumerIDList) > 0
		}
	}
	resp, err = a.invokeOK(ctx, "consumer offsets", addr, protocol.NewRequest(protocol.GetAllConsumerOffset, nil, nil))
	if err != nil {
		return nil, err
	}
	var ow protocol.ConsumerOffsetSerializeWrapper
	if err := protocol.DecodeJSON(resp.Body, &ow); err != nil {
		return nil, fmt.Errorf("admin: consumer offsets of %s: %w", addr, err)
	}
	have := ow.OffsetTable[topic+"@"+group]
	out := make(map[int32]int64, len(ts.OffsetTable))
	for _, e := range ts.OffsetTable {
		q := e.Queue.QueueID
		if off, stored := have[q]; stored && (!restart || relied) {
			out[q] = off
			continue
		}
		if _, err := a.invokeOK(ctx, "update offset", addr, protocol.NewRequest(protocol.UpdateConsumerOffset,
			&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: q, CommitOffset: e.Value.MaxOffset}, nil)); err != nil {
			return nil, err
		}
		out[q] = e.Value.MaxOffset
	}
	return out, nil
}
