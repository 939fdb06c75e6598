package admin

import (
	"context"
	"fmt"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// StartShareGroup starts group on topic at each broker group's master
// (START_SHARE_GROUP, SmartGo's own; protocol/sharestart.go has the rule):
// with restart, at the queues' ends unless a member of the group or
// another starter relies on its offsets; otherwise where it has none. The
// broker decides each topic's queues in one step. starter names this start
// (the same for all its topics). It returns every queue's offset after the
// decision; a broker group without a master is left out.
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
		resp, err := a.invokeOK(ctx, "start share group", addr, protocol.NewRequest(protocol.StartShareGroup, nil, body))
		if err != nil {
			return nil, err
		}
		var r protocol.StartShareGroupResponse
		if err := protocol.DecodeJSON(resp.Body, &r); err != nil {
			return nil, fmt.Errorf("admin: start share group: %w", err)
		}
		for q, off := range r.Offsets {
			out[client.MessageQueue{Topic: topic, BrokerName: bd.BrokerName, QueueID: q}] = off
		}
	}
	return out, nil
}
