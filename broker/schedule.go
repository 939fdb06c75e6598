package broker

import (
	"bytes"
	"context"
	"strconv"
	"time"

	"github.com/smartgo/smartgo/internal/beat"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// scheduleService delivers delayed messages: a message with delay level L
// waits in queue L-1 of SCHEDULE_TOPIC_XXXX until store time + the level's
// delay, then is put again to its real topic and queue. Progress per level
// is kept in delayOffsets (delayOffset.json). A queue of a level beyond
// the configured ones (left by a run with more levels) is delivered with
// the last level's delay. The service sleeps until the
// earliest due message or until a new delayed message arrives; it does not
// poll.
type scheduleService struct {
	b    *Broker
	wake chan struct{}
	// checked is, per level, masterFrom+1 of the mastership whose first
	// look at the level's progress was made (checkSinceMaster); only the
	// service's goroutine (run) touches it.
	checked map[int32]int64
	// start, when not nil, holds run's first look until it is closed
	// (tests: Options.scheduleStart).
	start <-chan struct{}
}

func newScheduleService(b *Broker) *scheduleService {
	return &scheduleService{b: b, wake: make(chan struct{}, 1), checked: map[int32]int64{}, start: b.opts.scheduleStart}
}

// notify is called on every arrival in the schedule topic.
func (s *scheduleService) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// maxScheduleSleep bounds a sleep so a failed re-put is retried.
const maxScheduleSleep = time.Second

func (s *scheduleService) run(ctx context.Context) {
	if s.b.opts.Role == RoleSlave && !s.b.controlled() {
		return
	}
	if s.start != nil {
		select {
		case <-s.start:
		case <-ctx.Done():
			return
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	// The longest sleep is a tick of the shared clock (beat), so an idle
	// broker's look falls in the same wake-up as its other once-a-second
	// work; the timer is only for what falls due sooner.
	look := beat.NewTicker(maxScheduleSleep)
	defer look.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-look.C:
		case <-s.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		next := s.deliverDue(ctx)
		if d := time.Until(next); d < maxScheduleSleep {
			timer.Reset(max(d, time.Millisecond))
		} else {
			timer.Stop()
		}
	}
}

// deliverDue re-puts every due message of every level and returns when the
// next one falls due.
func (s *scheduleService) deliverDue(ctx context.Context) time.Time {
	b := s.b
	now := b.now()
	next := now.Add(maxScheduleSleep)
	if ok, _ := b.writable(); !ok {
		return next // controller mode: only the master re-puts
	}
	levels := b.opts.DelayLevels
	for i, delay := range levels {
		level := int32(i + 1)
		due, ok := s.deliverLevel(ctx, level, delay, now)
		if ok && due.Before(next) {
			next = due
		}
	}
	// Queues of levels the broker no longer has (it ran with more levels
	// before a restart) wait the last level's delay, as a send naming a
	// level above the last does; without this they were never read.
	for _, qid := range b.store.QueueIDs(ScheduleTopic) {
		if int(qid) < len(levels) {
			continue
		}
		due, ok := s.deliverLevel(ctx, qid+1, levels[len(levels)-1], now)
		if ok && due.Before(next) {
			next = due
		}
	}
	return next
}

// deliverLevel processes one level's queue from its saved offset. It
// returns the due time of the first message not yet due (ok=false if the
// queue is drained).
func (s *scheduleService) deliverLevel(ctx context.Context, level int32, delay time.Duration, now time.Time) (time.Time, bool) {
	b := s.b
	qid := level - 1
	s.checkSinceMaster(level, qid)
	for ctx.Err() == nil {
		off := b.delayOffsets.Get(level)
		if min := b.store.MinOffset(ScheduleTopic, qid); off < min {
			off = min
		}
		res, err := b.store.GetMessages(ScheduleTopic, qid, off, 32, nil)
		if err == nil && res.Status == store.GetOffsetOverflowBadly && !b.isSlave() {
			// The progress is past the queue's end: the log lost the tail
			// the level had delivered (a crash under async flush, a damaged
			// or cut segment) and the queue's offsets were given again to
			// messages stored since. Staying there would never deliver
			// those: go on from the first one stored since this broker
			// became master, as a pull does (pull.go): by log offset
			// (masterFrom), not by store time, which the records before
			// may have from another clock (the old master's, or this
			// one's before it was set right).
			if to := min(off, b.store.OffsetByPhysical(ScheduleTopic, qid, b.masterFrom.Load())); to < off {
				res.Release()
				b.log.Warn("schedule: progress past the queue's end, moved to the first message since this broker became master",
					"level", level, "offset", off, "to", to)
				b.delayOffsets.Set(level, to)
				continue
			}
		}
		if err != nil || len(res.Buffers) == 0 {
			if err == nil {
				res.Release()
			}
			return time.Time{}, false
		}
		for i, buf := range res.Buffers {
			v, err := record.Parse(buf, false)
			if err != nil {
				b.log.Error("schedule: skipping unreadable record", "level", level, "offset", res.QueueOffsets[i], "err", err)
				b.delayOffsets.Set(level, res.QueueOffsets[i]+1)
				continue
			}
			due := time.UnixMilli(v.StoreTimestamp).Add(delay)
			if due.After(now) {
				res.Release()
				return due, true
			}
			if err := s.redeliver(ctx, buf); err != nil {
				b.log.Warn("schedule: re-put failed, will retry", "level", level, "offset", res.QueueOffsets[i], "err", err)
				res.Release()
				return now.Add(100 * time.Millisecond), true
			}
			b.delayOffsets.Set(level, res.QueueOffsets[i]+1)
		}
		res.Release()
	}
	return time.Time{}, false
}

// checkSinceMaster makes, once a mastership (masterFrom is set at start
// and at each promotion), the level's first look at its progress: progress
// above the first schedule entry stored since this broker became master
// was made on a log this one no longer is (the log lost the tail the level
// had delivered: a crash under async flush, a damaged or cut segment; or
// a promoted slave's copy ended before the old master's progress), and the
// queue's offsets from there were given again to messages stored since.
// deliverLevel's past-the-end check sees that only while the progress is
// past the queue's end: delayed messages sent before its first look could
// fill the gap, and those at the freed offsets were never delivered. The
// bound is a log offset, not a store time (pull.go). The look waits for
// dispatch to reach masterFrom (in controller mode it can trail the log
// at start), so that the bound counts every entry before it; until then
// the level is delivered as before.
func (s *scheduleService) checkSinceMaster(level, qid int32) {
	b := s.b
	mf := b.masterFrom.Load()
	if s.checked[level] == mf+1 || b.store.DispatchedPhysicalOffset() < mf {
		return
	}
	s.checked[level] = mf + 1
	if off, to := b.delayOffsets.Get(level), b.store.OffsetByPhysical(ScheduleTopic, qid, mf); off > to {
		b.log.Warn("schedule: progress beyond what was stored before this broker became master, moved to the first message since",
			"level", level, "offset", off, "to", to)
		b.delayOffsets.Set(level, to)
	}
}

// redeliver puts a due message back to its real topic and queue.
func (s *scheduleService) redeliver(ctx context.Context, buf []byte) error {
	b := s.b
	m, _, err := record.Decode(buf, false)
	if err != nil {
		return err
	}
	props, err := record.ParseProperties(m.Properties)
	if err != nil {
		return err
	}
	realTopic, ok := props.Get(record.PropertyRealTopic)
	if !ok {
		b.log.Error("schedule: delayed message without REAL_TOPIC dropped", "offset", m.PhysicalOffset)
		return nil
	}
	qidText, _ := props.Get(record.PropertyRealQueueID)
	qid, _ := strconv.Atoi(qidText)
	props.Del(record.PropertyDelayLevel)
	props.Del(record.PropertyWaitStoreMsgOK) // records stored before WAIT was stripped
	out := &record.Message{
		Topic: realTopic, QueueID: int32(qid), Flag: m.Flag, SysFlag: m.SysFlag, BornTimestamp: m.BornTimestamp,
		BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes, Body: m.Body, Properties: props.String(),
	}
	b.republishTopic(out.Topic, out.QueueID)
	// The re-put need not wait for the flush: the delayed copy is durable.
	if _, err := b.put(ctx, out, false); err != nil {
		return err
	}
	b.stats.AddPut(out.Topic, 1, int64(len(out.Body)))
	return nil
}

var scheduleTopicBytes = []byte(ScheduleTopic)

// scheduleTagsCode gives schedule-topic entries their delivery time as
// consume-queue tagsCode (RocketMQ's convention; tools read it).
func (b *Broker) scheduleTagsCode(topic, properties []byte, storeTimestamp int64) (int64, bool) {
	if !bytes.Equal(topic, scheduleTopicBytes) {
		return 0, false
	}
	v, ok := record.LookupProperty(properties, record.PropertyDelayLevel)
	if !ok {
		return 0, false
	}
	level, err := strconv.Atoi(string(v))
	if err != nil || level <= 0 {
		return 0, false
	}
	level = min(level, len(b.opts.DelayLevels))
	return storeTimestamp + b.opts.DelayLevels[level-1].Milliseconds(), true
}
