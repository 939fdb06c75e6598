package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// ErrNoController: the address answers that it runs no controller (a
// registry or broker of a cluster without one).
var ErrNoController = errors.New("admin: no controller")

// noController is the error for addr answering REQUEST_CODE_NOT_SUPPORTED
// to a controller request.
func noController(addr string) error {
	return fmt.Errorf("%w at %s: it runs without a controller replica, so the cluster has no controller "+
		"(masters are configured, not elected; give -controller the replicas of one if there is)", ErrNoController, addr)
}

// ControllerMetadata asks one controller replica what it knows: the
// replicas, the leader, its Raft state (with a warning when there is no
// leader) and every broker group's master, epoch and sync state set.
func (a *Admin) ControllerMetadata(ctx context.Context, addr string) (*protocol.ControllerMetadata, error) {
	resp, err := a.invoke(ctx, "controller metadata", addr, protocol.NewRequest(protocol.ControllerGetMetadata, nil, nil))
	if err != nil {
		return nil, err
	}
	switch resp.Code {
	case protocol.Success:
	case protocol.RequestCodeNotSupported:
		return nil, noController(addr)
	default:
		return nil, &client.BrokerError{Addr: addr, Op: "controller metadata", Code: resp.Code, Remark: resp.Remark}
	}
	var md protocol.ControllerMetadata
	if err := protocol.DecodeControllerBody(resp.Body, &md); err != nil {
		return nil, fmt.Errorf("admin: controller metadata from %s: %w", addr, err)
	}
	return &md, nil
}

// ControllerElect asks the controller to elect a master for group:
// brokerID 0 lets it choose (only when the current master is gone), a
// positive id hands the group over to that broker (alive and in the sync
// state set, or anywhere alive with unclean). The request goes to each of
// addrs until the leader answers; it returns the group's new state.
func (a *Admin) ControllerElect(ctx context.Context, addrs []string, group string, brokerID int64, unclean bool) (*protocol.ControllerGroup, error) {
	body, err := protocol.EncodeJSON(protocol.ControllerElect{BrokerID: brokerID, BrokerName: group, Unclean: unclean})
	if err != nil {
		return nil, err
	}
	order := append([]string(nil), addrs...)
	var errs []error
	for i := 0; i < len(order) && i < 8; i++ {
		resp, err := a.invoke(ctx, "controller elect", order[i], protocol.NewRequest(protocol.ControllerElectMaster, nil, body))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if resp.Code == protocol.ControllerNotLeader {
			if l := resp.ExtFields[protocol.ControllerLeaderField]; l != "" {
				order = append(order, l)
			}
			errs = append(errs, fmt.Errorf("%s: %s", order[i], resp.Remark))
			continue
		}
		if resp.Code == protocol.RequestCodeNotSupported {
			errs = append(errs, noController(order[i]))
			continue
		}
		if resp.Code != protocol.Success {
			return nil, &client.BrokerError{Addr: order[i], Op: "controller elect", Code: resp.Code, Remark: resp.Remark}
		}
		var g protocol.ControllerGroup
		if err := protocol.DecodeControllerBody(resp.Body, &g); err != nil {
			return nil, fmt.Errorf("admin: controller elect: %w", err)
		}
		return &g, nil
	}
	if len(errs) > 0 && !slices.ContainsFunc(errs, func(err error) bool { return !errors.Is(err, ErrNoController) }) {
		return nil, errs[0] // the cluster has no controller: say that, once
	}
	return nil, fmt.Errorf("%w: admin: no controller leader answered: %w", client.ErrBrokerUnavailable, errors.Join(errs...))
}
