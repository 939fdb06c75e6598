package bridge

import (
	"context"
	"errors"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

var _ amqp.AlarmSource = (*AMQPBackend)(nil)

// AMQPDiskAlarm is the reason the backend's resource alarm gives (in
// connection.blocked), RabbitMQ's words for its disk alarm.
const AMQPDiskAlarm = "low on disk"

// amqpAlarmPoll: how often the backend reads the disk state of the
// brokers its logs are on (the brokers measure their disks every second).
const amqpAlarmPoll = 500 * time.Millisecond

// AMQPDiskAlarmMargin: the alarm goes on once a broker's disk use is
// within this fraction of the disk of its store.disk_full_ratio (88 % for
// the default 90 %), before the broker refuses writes, as RabbitMQ's
// disk_free_limit does; and off once every such broker is below it again.
const AMQPDiskAlarmMargin = 0.02

// brokerDisk is what the backend last knew of a broker group's disk.
type brokerDisk struct {
	topic string // a topic of one of the backend's logs on it (for its route)
	low   bool   // its use is within AMQPDiskAlarmMargin of its full mark
	full  bool   // it refuses writes for a full disk
	gone  bool   // the registries no longer list it: low and full are as last known
}

func (d *brokerDisk) alarmed() bool { return d.low || d.full }

// WatchAlarm implements amqp.AlarmSource. The alarm is on while a broker
// that one of the backend's logs is on is low on disk (its use within
// AMQPDiskAlarmMargin of its store.disk_full_ratio) or refuses writes for
// a full disk: the backend reads the brokers' disk state every
// amqpAlarmPoll, and a store refused with client.ErrDiskFull raises the
// alarm at once. A broker the registries stop listing keeps its last
// state until it is listed again or no log of the backend is on it any
// more (its queues deleted). Only one watcher is kept (a later call
// replaces it).
func (b *AMQPBackend) WatchAlarm(set func(reason string)) (stop func()) {
	b.alarmMu.Lock()
	b.alarmSet = set
	if b.alarmOn {
		set(AMQPDiskAlarm)
	}
	b.alarmMu.Unlock()
	b.kickAlarm()
	return func() {
		b.alarmMu.Lock()
		b.alarmSet = nil
		b.alarmMu.Unlock()
	}
}

func (b *AMQPBackend) kickAlarm() {
	select {
	case b.alarmKick <- struct{}{}:
	default:
	}
}

// storeFailed notes a store of topic on broker that failed with err: a
// full disk raises the alarm.
func (b *AMQPBackend) storeFailed(broker, topic string, err error) {
	if !errors.Is(err, client.ErrDiskFull) {
		return
	}
	b.alarmMu.Lock()
	d := b.disk(broker, topic)
	if !d.full {
		d.full = true
		b.updateAlarmLocked("a broker refused a store: its disk is full", "broker", broker, "topic", topic, "err", err)
	}
	b.alarmMu.Unlock()
	b.kickAlarm()
}

// disk returns broker's entry, adding it. alarmMu held.
func (b *AMQPBackend) disk(broker, topic string) *brokerDisk {
	if b.disks == nil {
		b.disks = map[string]*brokerDisk{}
	}
	d := b.disks[broker]
	if d == nil {
		d = &brokerDisk{topic: topic}
		b.disks[broker] = d
	}
	return d
}

// updateAlarmLocked raises or clears the alarm from the brokers' disks,
// logging why. alarmMu held.
func (b *AMQPBackend) updateAlarmLocked(why string, args ...any) {
	on := false
	for _, d := range b.disks {
		on = on || d.alarmed()
	}
	if on == b.alarmOn {
		return
	}
	b.alarmOn = on
	reason := ""
	if on {
		reason = AMQPDiskAlarm
		b.log.Warn("AMQP backend: "+why+"; AMQP publishers are blocked until every broker has room", args...)
	} else {
		b.log.Info("AMQP backend: the brokers have room again; AMQP publishers resume")
	}
	if b.alarmSet != nil {
		b.alarmSet(reason)
	}
}

// alarmLoop reads the disks of the brokers the logs are on every
// amqpAlarmPoll (at once when kicked) until the backend closes.
func (b *AMQPBackend) alarmLoop() {
	defer b.wg.Done()
	for {
		b.checkDisks()
		select {
		case <-b.ctx.Done():
			return
		case <-b.alarmKick:
		case <-time.After(amqpAlarmPoll):
		}
	}
}

// servedBrokers returns the broker groups the backend's logs are on,
// each with a topic of one of them; complete is false when the
// definitions log could not be looked at (a save holds it).
func (b *AMQPBackend) servedBrokers() (served map[string]string, complete bool) {
	served = map[string]string{}
	b.mu.Lock()
	for l := range b.logs {
		served[l.mq.BrokerName] = l.topic
	}
	b.mu.Unlock()
	if !b.defsMu.TryLock() { // SaveDefinitions holds it across its appends
		return served, false
	}
	if b.defs != nil {
		served[b.defs.mq.BrokerName] = b.defs.topic
	}
	b.defsMu.Unlock()
	return served, true
}

// checkDisks reads the disk state of every broker the logs are on and
// updates the alarm. A broker no log is on any more is forgotten; one the
// registries do not list (or that does not answer) keeps its last state.
func (b *AMQPBackend) checkDisks() {
	served, complete := b.servedBrokers()
	b.alarmMu.Lock()
	for broker, d := range b.disks {
		if _, ok := served[broker]; !ok {
			if complete {
				delete(b.disks, broker) // no log of the backend is on it
			} else {
				served[broker] = d.topic
			}
		}
	}
	b.alarmMu.Unlock()
	type reading struct {
		st  admin.DiskState
		err error
	}
	got := make(map[string]reading, len(served))
	for broker, topic := range served {
		ctx, cancel := context.WithTimeout(b.ctx, b.opts.RequestTimeout)
		st, err := b.adm.BrokerDisk(ctx, topic, broker)
		cancel()
		got[broker] = reading{st, err}
	}
	b.alarmMu.Lock()
	defer b.alarmMu.Unlock()
	var args []any
	for broker, r := range got {
		d := b.disk(broker, served[broker])
		switch {
		case r.err == nil:
			d.gone = false
			d.full = r.st.Full
			d.low = r.st.Used >= r.st.FullRatio-AMQPDiskAlarmMargin
			if d.alarmed() && args == nil {
				args = []any{"broker", broker, "used", r.st.Used, "full_ratio", r.st.FullRatio, "full", r.st.Full}
			}
		case (errors.Is(r.err, client.ErrNoRoute) || errors.Is(r.err, client.ErrTopicNotExist)) && !d.gone:
			d.gone = true
			if d.alarmed() {
				b.log.Warn("AMQP backend: a broker low on disk is no longer listed by the registries; publishers stay blocked until it is back or its queues are deleted",
					"broker", broker)
			}
		}
	}
	b.updateAlarmLocked("a broker is low on disk", args...)
}
