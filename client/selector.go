package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// SQL92 subscriptions.
//
// A SQL92 selector ("a > 5 AND region IN ('eu','us') AND TAGS IS NOT
// NULL") is evaluated by the brokers against each message's properties;
// only matching messages are pulled. The brokers check a selector when
// the consumer starts (CHECK_CLIENT_CONFIG, as RocketMQ's clients do) and
// at every heartbeat, so a malformed one fails Start with an error that
// wraps ErrBadSubscription and says what is wrong where. The language is
// RocketMQ's (see the broker's filter package): comparisons, BETWEEN, IN,
// IS [NOT] NULL, AND/OR/NOT, string, number and boolean literals; TAGS is
// the message's tag.

// opCheckSubscription names CHECK_CLIENT_CONFIG in errors.
const opCheckSubscription = "check subscription"

func (b *consumerBase) subscribeSQL(topic, selector string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic", ErrBadOptions)
	}
	s := sqlSubscription(topic, selector)
	if s.expr == "" {
		return fmt.Errorf("%w: empty SQL92 selector for %s", ErrBadSubscription, topic)
	}
	b.smu.Lock()
	b.subs[topic] = s
	b.smu.Unlock()
	return nil
}

// SubscribeSQL adds (or replaces) a topic subscription with a SQL92
// selector over message properties. Call it before Start; Start fails if a
// broker refuses the selector.
func (c *PushConsumer) SubscribeSQL(topic, selector string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return fmt.Errorf("%w: subscribe before Start", ErrBadOptions)
	}
	return c.base.subscribeSQL(topic, selector)
}

// SubscribeSQL joins the group's rebalancing for topic with a SQL92
// selector. Call it before Start; Start fails if a broker refuses it.
func (c *PullConsumer) SubscribeSQL(topic, selector string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.assign {
		return fmt.Errorf("%w: Subscribe before Start and not with Assign", ErrBadOptions)
	}
	return c.base.subscribeSQL(topic, selector)
}

// checkSubscriptions asks the master of every broker holding a SQL92
// subscription's topic whether it accepts the selector. Topics without a
// route yet are left to the heartbeat's check.
func (b *consumerBase) checkSubscriptions(ctx context.Context) error {
	for _, s := range b.subscriptions() {
		if s.exprType != protocol.ExpressionTypeSQL92 {
			continue
		}
		tr, err := b.core.route(ctx, s.topic)
		if err != nil {
			continue
		}
		body, err := protocol.EncodeJSON(protocol.CheckClientRequestBody{ClientID: b.core.clientID, Group: b.opts.Group,
			SubscriptionData: s.data()})
		if err != nil {
			return fmt.Errorf("client: encode subscription check: %w", err)
		}
		for _, bd := range tr.data.BrokerDatas {
			addr := b.core.masterAddr(bd.BrokerName)
			if addr == "" {
				continue
			}
			cctx, cancel := b.core.callCtx(ctx, 0)
			_, err := b.core.invokeOK(cctx, opCheckSubscription, addr, protocol.NewRequest(protocol.CheckClientConfig, nil, body))
			cancel()
			var be *BrokerError
			if errors.As(err, &be) {
				return fmt.Errorf("client: SQL92 subscription to %s: %w", s.topic, err)
			}
			if err != nil { // unreachable now: the heartbeats check it again
				b.core.log.Warn("could not check a SQL92 subscription", "topic", s.topic, "broker", addr, "err", err)
			}
		}
	}
	return nil
}
