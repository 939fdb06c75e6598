package admin

import (
	"context"
	"fmt"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// BrokerConfig returns the configuration of the broker at addr under
// RocketMQ's key names (GET_BROKER_CONFIG, as mqadmin getBrokerConfig).
func (a *Admin) BrokerConfig(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := a.invokeOK(ctx, "broker config", addr, protocol.NewRequest(protocol.GetBrokerConfig, nil, nil))
	if err != nil {
		return nil, err
	}
	kv, err := protocol.DecodeProperties(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("admin: broker config of %s: %w", addr, err)
	}
	return kv, nil
}

// UpdateBrokerConfig changes keys of the configuration of the broker at
// addr at run time, until it restarts (UPDATE_BROKER_CONFIG, as mqadmin
// updateBrokerConfig). The broker refuses, naming it, a key it cannot
// change (see broker/brokerconfig.go) and then changes none.
func (a *Admin) UpdateBrokerConfig(ctx context.Context, addr string, kv map[string]string) error {
	if len(kv) == 0 {
		return fmt.Errorf("%w: no key to change", client.ErrBadOptions)
	}
	_, err := a.invokeOK(ctx, "update broker config", addr, protocol.NewRequest(protocol.UpdateBrokerConfig, nil, protocol.EncodeProperties(kv)))
	return err
}

// QueueProgress is a group's progress on one queue.
type QueueProgress struct {
	Queue          client.MessageQueue `json:"queue"`
	BrokerOffset   int64               `json:"brokerOffset"`
	ConsumerOffset int64               `json:"consumerOffset"`
	Lag            int64               `json:"lag"`
	LastTimestamp  int64               `json:"lastTimestamp"`
}
