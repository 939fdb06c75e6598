package bridge

import (
	"context"
	"errors"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/client"
)

var _ amqp.AlarmSource = (*AMQPBackend)(nil)

// AMQPDiskAlarm is the reason the backend's resource alarm gives (in
// connection.blocked), RabbitMQ's words for its disk alarm.
const AMQPDiskAlarm = "low on disk"

// amqpAlarmPoll: while a broker's disk is full, how often the backend
// asks the registries whether it takes writes again.
const amqpAlarmPoll = 500 * time.Millisecond

// WatchAlarm implements amqp.AlarmSource. The alarm goes on when a
// broker refuses one of the backend's stores because its disk is full
// (client.ErrDiskFull) and off once the registries route every such
// broker's topics as writable again: a broker registers at once when its
// disk fills or frees, and the backend asks every amqpAlarmPoll while
// the alarm is on. Only one watcher is kept (a later call replaces it).
func (b *AMQPBackend) WatchAlarm(set func(reason string)) (stop func()) {
	b.alarmMu.Lock()
	b.alarmSet = set
	if len(b.fullBrokers) > 0 {
		set(AMQPDiskAlarm)
	}
	b.alarmMu.Unlock()
	return func() {
		b.alarmMu.Lock()
		b.alarmSet = nil
		b.alarmMu.Unlock()
	}
}

// storeFailed notes a store of topic on broker that failed with err: a
// full disk raises the alarm.
func (b *AMQPBackend) storeFailed(broker, topic string, err error) {
	if !errors.Is(err, client.ErrDiskFull) {
		return
	}
	b.alarmMu.Lock()
	defer b.alarmMu.Unlock()
	if _, ok := b.fullBrokers[broker]; ok {
		return
	}
	if b.fullBrokers == nil {
		b.fullBrokers = map[string]string{}
	}
	b.fullBrokers[broker] = topic
	if len(b.fullBrokers) == 1 {
		b.log.Warn("AMQP backend: a broker's disk is full; AMQP publishers are blocked until it takes writes",
			"broker", broker, "topic", topic, "err", err)
		if b.alarmSet != nil {
			b.alarmSet(AMQPDiskAlarm)
		}
	}
	select {
	case b.alarmKick <- struct{}{}:
	default:
	}
}

// alarmLoop clears the alarm: while some broker is full, it asks the
// registries every amqpAlarmPoll whether that broker takes writes again.
func (b *AMQPBackend) alarmLoop() {
	defer b.wg.Done()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.alarmKick:
		}
		for b.checkFull() {
			select {
			case <-b.ctx.Done():
				return
			case <-time.After(amqpAlarmPoll):
			}
		}
	}
}

// checkFull drops the brokers that take writes again from the full ones
// (clearing the alarm when none is left) and reports whether some are
// still full.
func (b *AMQPBackend) checkFull() bool {
	b.alarmMu.Lock()
	full := make(map[string]string, len(b.fullBrokers))
	for k, v := range b.fullBrokers {
		full[k] = v
	}
	b.alarmMu.Unlock()
	var writable []string
	for broker, topic := range full {
		ctx, cancel := context.WithTimeout(b.ctx, b.opts.RequestTimeout)
		isFull, err := b.adm.DiskFull(ctx, topic, broker)
		cancel()
		if err == nil && !isFull {
			writable = append(writable, broker)
		} // else asked again at the next poll
	}
	b.alarmMu.Lock()
	defer b.alarmMu.Unlock()
	for _, broker := range writable {
		delete(b.fullBrokers, broker)
	}
	if len(b.fullBrokers) > 0 {
		return true
	}
	if len(full) > 0 {
		b.log.Info("AMQP backend: the brokers take writes again; AMQP publishers resume")
		if b.alarmSet != nil {
			b.alarmSet("")
		}
	}
	return false
}
