package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// DefaultGroupRetryMaxTimes is how often a consumer group's failed
// messages are retried before they go to its %DLQ% topic, when
// CreateGroup is not told (RocketMQ's default).
const DefaultGroupRetryMaxTimes = 16

// MaxGroupRetryMaxTimes is the most retries a group may have (the brokers'
// bound).
const MaxGroupRetryMaxTimes = 64

// GroupConfig is a consumer group's subscription config, as CreateGroup
// writes it; the zero value but for Name is RocketMQ's default group.
type GroupConfig struct {
	Name          string
	NoBroadcast   bool  // consumeBroadcastEnable false: broadcasting consumers are refused
	Disabled      bool  // consumeEnable false: the brokers refuse its pulls
	RetryMaxTimes int32 // 0: DefaultGroupRetryMaxTimes; negative: none (straight to %DLQ%<group>)
}

// subscriptionConfig is g as the brokers' UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
// body; the fields GroupConfig does not name keep RocketMQ's defaults (those
// of a group a broker creates on a consumer's first heartbeat).
func (g GroupConfig) subscriptionConfig() protocol.SubscriptionGroupConfig {
	retries := g.RetryMaxTimes
	switch {
	case retries == 0:
		retries = DefaultGroupRetryMaxTimes
	case retries < 0:
		retries = 0
	}
	return protocol.SubscriptionGroupConfig{GroupName: g.Name, ConsumeEnable: !g.Disabled,
		ConsumeBroadcastEnable: !g.NoBroadcast, RetryMaxTimes: retries, RetryQueueNums: 1,
		ConsumeFromMinEnable: true, WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIdsChangedEnable: true}
}

// CreateGroup creates a consumer group, or updates its config, on every
// master of the cluster ("" = all clusters, asked all at once), as mqadmin
// updateSubGroup does (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP). A group
// created before its consumers first start can have its offsets set
// (ResetOffset) so that they start there. When some masters do not
// answer, the others have the group and the error is ErrPartial naming
// the silent ones (Answered lists the others).
func (a *Admin) CreateGroup(ctx context.Context, cluster string, g GroupConfig) error {
	if err := validateGroup(g.Name); err != nil {
		return err
	}
	if g.RetryMaxTimes > MaxGroupRetryMaxTimes {
		return fmt.Errorf("%w: group %s: %d retries, at most %d", client.ErrBadOptions, g.Name, g.RetryMaxTimes, MaxGroupRetryMaxTimes)
	}
	body, err := protocol.EncodeJSON(g.subscriptionConfig())
	if err != nil {
		return err
	}
	masters, err := a.Masters(ctx, cluster)
	if err != nil {
		return err
	}
	return a.fromEach(ctx, "create group", masters, func() *protocol.Command {
		return protocol.NewRequest(protocol.UpdateAndCreateSubscriptionGroup, nil, body)
	}, func(b Broker, resp *protocol.Command) error { return okAnswer("create group", b.Addr, resp) })
}

// validateGroup checks a consumer group name against the brokers' rule.
func validateGroup(group string) error { return client.ValidateGroup(group) }

// GroupExists reports whether any master knows the consumer group (a
// subscription config, committed offsets or online consumers). Masters
// that do not answer are left out.
func (a *Admin) GroupExists(ctx context.Context, group string) (bool, error) {
	err := a.groupKnown(ctx, group, false)
	if errors.Is(err, client.ErrGroupNotExist) {
		return false, nil
	}
	return err == nil, err
}

// DeleteGroup deletes a consumer group's subscription config on every
// master of the cluster ("" = all clusters, asked all at once), and with
// removeOffsets its committed offsets too (DELETE_SUBSCRIPTIONGROUP); the
// brokers forget its statistics either way. When some masters do not
// answer, the others have deleted it and the error is ErrPartial naming
// the silent ones (Answered lists the others).
func (a *Admin) DeleteGroup(ctx context.Context, cluster, group string, removeOffsets bool) error {
	if group == "" {
		return fmt.Errorf("%w: empty group name", client.ErrBadOptions)
	}
	masters, err := a.Masters(ctx, cluster)
	if err != nil {
		return err
	}
	return a.fromEach(ctx, "delete group", masters, func() *protocol.Command {
		return protocol.NewRequest(protocol.DeleteSubscriptionGroup,
			&protocol.DeleteSubscriptionGroupRequestHeader{GroupName: group, RemoveOffset: removeOffsets}, nil)
	}, func(b Broker, resp *protocol.Command) error { return okAnswer("delete group", b.Addr, resp) })
}

// checkGroup returns client.ErrGroupNotExist when no master knows group
// (no subscription config, offsets or consumers on any of them); a
// master that does not answer counts as knowing it.
func (a *Admin) checkGroup(ctx context.Context, group string) error {
	return a.groupKnown(ctx, group, true)
}

// groupKnown returns client.ErrGroupNotExist when none of the masters
// (asked all at once) knows group; one that does not answer counts as
// knowing it when silentKnows.
func (a *Admin) groupKnown(ctx context.Context, group string, silentKnows bool) error {
	masters, err := a.Masters(ctx, "")
	if err != nil {
		return err
	}
	known := false
	err = a.fromEach(ctx, "consume stats", masters, func() *protocol.Command {
		return protocol.NewRequest(protocol.GetConsumeStats, &protocol.GetConsumeStatsRequestHeader{ConsumerGroup: group}, nil)
	}, func(b Broker, resp *protocol.Command) error {
		if err := okAnswer("consume stats", b.Addr, resp); !errors.Is(err, client.ErrGroupNotExist) {
			known = true // it knows the group, or its answer cannot tell
		}
		return nil
	})
	if known || err != nil && silentKnows {
		return nil
	}
	return fmt.Errorf("%w: %s (no master knows it)", client.ErrGroupNotExist, group)
}
