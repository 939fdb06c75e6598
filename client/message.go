package client

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// MessageQueue names one queue of a topic on one broker.
type MessageQueue = protocol.MessageQueue

// Message is a message to send.
type Message struct {
	Topic string
	Body  []byte
	// Tags is the single tag consumers filter on ("" = none).
	Tags string
	// Keys are business keys, indexed by the broker (query by key).
	Keys []string
	// DelayLevel > 0 delivers the message after the broker's delay level
	// (1 = 1 s ... 18 = 2 h by default).
	DelayLevel int
	// Flag is the user flag stored with the message.
	Flag int32
	// Properties are user properties; keys and values must not contain
	// 0x01 or 0x02.
	Properties map[string]string
}

// properties encodes the message's properties with the given unique id.
func (m *Message) properties(uniq string, wait bool) (string, error) {
	var p record.Properties
	for k, v := range m.Properties {
		p.Set(k, v)
	}
	if m.Tags != "" {
		p.Set(record.PropertyTags, m.Tags)
	}
	if len(m.Keys) > 0 {
		p.Set(record.PropertyKeys, strings.Join(m.Keys, record.KeySeparator))
	}
	if m.DelayLevel > 0 {
		p.Set(record.PropertyDelayLevel, strconv.Itoa(m.DelayLevel))
	}
	if uniq != "" {
		p.Set(record.PropertyUniqueClientMessageIDKeyIndex, uniq)
	}
	if !wait {
		p.Set(record.PropertyWaitStoreMsgOK, "false")
	}
	if err := p.Validate(); err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadMessage, err)
	}
	return p.String(), nil
}

// MessageExt is a received message.
type MessageExt struct {
	Message
	// MsgID is the client id (UNIQ_KEY) or, without one, OffsetMsgID.
	MsgID string
	// OffsetMsgID encodes the store host and commitlog offset.
	OffsetMsgID     string
	Queue           MessageQueue
	QueueOffset     int64
	CommitLogOffset int64
	BornTimestamp   int64 // ms
	StoreTimestamp  int64 // ms
	BornHost        netip.AddrPort
	StoreHost       netip.AddrPort
	ReconsumeTimes  int32
	SysFlag         int32
	// RawProperties is the properties string as stored.
	RawProperties string
}

// Property returns a property of the message (user or system).
func (m *MessageExt) Property(key string) string {
	v, _ := record.LookupPropertyString(m.RawProperties, key)
	return v
}

// fromRecord converts a decoded record; the body is decompressed.
//
// The body is always the message's own memory: r.Body points into the
// pull response, which shares a large read buffer with other frames of
// the connection, and an application may keep a message for as long as
// it likes (a retained MQTT message, a queued delivery). A slice would
// keep the whole buffer alive with it.
func fromRecord(r *record.Message, brokerName string) (*MessageExt, error) {
	var body []byte
	if r.SysFlag&record.FlagCompressed != 0 {
		b, err := record.DecompressBody(nil, r.Body, r.SysFlag, 0)
		if err != nil {
			return nil, fmt.Errorf("client: decompress message at %d: %w", r.PhysicalOffset, err)
		}
		body = b
	} else if r.Body != nil {
		body = bytes.Clone(r.Body)
	}
	m := &MessageExt{
		Message:         Message{Topic: r.Topic, Body: body, Flag: r.Flag},
		OffsetMsgID:     record.OffsetMessageID(r.StoreHost, r.PhysicalOffset),
		Queue:           MessageQueue{Topic: r.Topic, BrokerName: brokerName, QueueID: r.QueueID},
		QueueOffset:     r.QueueOffset,
		CommitLogOffset: r.PhysicalOffset,
		BornTimestamp:   r.BornTimestamp,
		StoreTimestamp:  r.StoreTimestamp,
		BornHost:        r.BornHost,
		StoreHost:       r.StoreHost,
		ReconsumeTimes:  r.ReconsumeTimes,
		SysFlag:         r.SysFlag,
		RawProperties:   r.Properties,
	}
	props, _ := record.ParseProperties(r.Properties)
	for _, p := range props {
		switch p.Key {
		case record.PropertyTags:
			m.Tags = p.Value
		case record.PropertyKeys:
			m.Keys = strings.Fields(p.Value)
		case record.PropertyDelayLevel:
			m.DelayLevel, _ = strconv.Atoi(p.Value)
		case record.PropertyUniqueClientMessageIDKeyIndex:
			m.MsgID = p.Value
		}
		if !systemProperty(p.Key) {
			if m.Properties == nil {
				m.Properties = map[string]string{}
			}
			m.Properties[p.Key] = p.Value
		}
	}
	if m.MsgID == "" {
		m.MsgID = m.OffsetMsgID
	}
	return m, nil
}

var systemProperties = map[string]bool{
	record.PropertyKeys: true, record.PropertyTags: true, record.PropertyWaitStoreMsgOK: true,
	record.PropertyDelayLevel: true, record.PropertyRetryTopic: true, record.PropertyRealTopic: true,
	record.PropertyRealQueueID: true, record.PropertyTransactionPrepared: true, record.PropertyProducerGroup: true,
	record.PropertyMinOffset: true, record.PropertyMaxOffset: true, record.PropertyOriginMessageID: true,
	record.PropertyReconsumeTime: true, record.PropertyMsgRegion: true, record.PropertyTraceSwitch: true,
	record.PropertyUniqueClientMessageIDKeyIndex: true, record.PropertyMaxReconsumeTimes: true,
	record.PropertyConsumeStartTimestamp: true, record.PropertyCluster: true,
}

func systemProperty(k string) bool { return systemProperties[k] }

// DecodeMessages decodes a pull, query or view body (commitlog records
// back to back) from the named broker; compressed bodies are inflated.
func DecodeMessages(body []byte, brokerName string) ([]*MessageExt, error) {
	return decodeMessages(body, brokerName)
}

// decodeMessages decodes a pull or query body (records back to back).
func decodeMessages(body []byte, brokerName string) ([]*MessageExt, error) {
	var out []*MessageExt
	for len(body) > 0 {
		r, n, err := record.Decode(body, false)
		if err != nil {
			return out, fmt.Errorf("client: decode message: %w", err)
		}
		body = body[n:]
		m, err := fromRecord(r, brokerName)
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

// SendStatus is the outcome of a stored message.
type SendStatus int

const (
	// SendOK: stored (and flushed/replicated as the broker is configured).
	SendOK SendStatus = iota
	// SendFlushDiskTimeout: stored, but the sync flush did not finish in time.
	SendFlushDiskTimeout
	// SendFlushSlaveTimeout: stored, but the slave did not confirm in time.
	SendFlushSlaveTimeout
	// SendSlaveNotAvailable: stored on the master, no slave to replicate to.
	SendSlaveNotAvailable
)

func (s SendStatus) String() string {
	switch s {
	case SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	}
	return "SEND_OK"
}

// SendResult describes a stored message (or batch).
type SendResult struct {
	Status SendStatus
	// MsgID is the client id (UNIQ_KEY); for a batch the ids joined by ",".
	MsgID string
	// OffsetMsgID is the broker's offset id (batch: joined by ",").
	OffsetMsgID string
	Queue       MessageQueue
	// QueueOffset is the logical offset (the first one for a batch).
	QueueOffset int64
}
