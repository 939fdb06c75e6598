package client

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unsafe"

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

// encodeProperties encodes the message's properties with a new unique id
// from ids, returning both (uniq is a substring of props). It gives what
// properties(ids.Next(), wait) gives, pair for pair; a message without
// user properties, whose tags and keys need no checks beyond the
// separators, is encoded in one allocation.
func (m *Message) encodeProperties(ids *record.UniqueIDGenerator, wait bool) (props, uniq string, err error) {
	if n, ok := m.plainPropertiesLen(wait); ok {
		var idb [record.UniqueIDLenV6]byte
		id := ids.AppendNext(idb[:0])
		buf := make([]byte, 0, n-len(idb)+len(id))
		sep := func() {
			if len(buf) > 0 {
				buf = append(buf, record.PropertySeparator)
			}
		}
		if m.Tags != "" {
			buf = append(append(append(buf, record.PropertyTags...), record.NameValueSeparator), m.Tags...)
		}
		if len(m.Keys) > 0 {
			sep()
			buf = append(append(buf, record.PropertyKeys...), record.NameValueSeparator)
			for i, k := range m.Keys {
				if i > 0 {
					buf = append(buf, record.KeySeparator...)
				}
				buf = append(buf, k...)
			}
		}
		if m.DelayLevel > 0 {
			sep()
			buf = strconv.AppendInt(append(append(buf, record.PropertyDelayLevel...), record.NameValueSeparator), int64(m.DelayLevel), 10)
		}
		sep()
		buf = append(append(buf, record.PropertyUniqueClientMessageIDKeyIndex...), record.NameValueSeparator)
		at := len(buf)
		buf = append(buf, id...)
		end := len(buf)
		if !wait {
			buf = append(append(append(buf, record.PropertySeparator), record.PropertyWaitStoreMsgOK...), record.NameValueSeparator)
			buf = append(buf, "false"...)
		}
		props = bufString(buf)
		return props, props[at:end], nil
	}
	uniq = ids.Next()
	props, err = m.properties(uniq, wait)
	return props, uniq, err
}

// MaxPropertiesLen is the most bytes a message's encoded properties may
// take in a broker record (a signed short; store/record.MaxPropertiesLen),
// the names, separators and the properties the client and the broker add
// (UNIQ_KEY, the CRC trailer) included.
const MaxPropertiesLen = record.MaxPropertiesLen

// plainPropertiesLen reports whether encodeProperties may encode m
// directly (no user properties; tags and keys valid without Validate's
// other checks) and the encoded length with a 56-character unique id
// (IPv6; an IPv4 one is 32), delay levels counted at 20 digits.
func (m *Message) plainPropertiesLen(wait bool) (int, bool) {
	if len(m.Properties) > 0 || strings.ContainsAny(m.Tags, "\x01\x02") {
		return 0, false
	}
	n := len(record.PropertyUniqueClientMessageIDKeyIndex) + 1 + record.UniqueIDLenV6
	if m.Tags != "" {
		n += len(record.PropertyTags) + 2 + len(m.Tags)
	}
	if len(m.Keys) > 0 {
		n += len(record.PropertyKeys) + 2 + len(m.Keys) - 1
		for _, k := range m.Keys {
			if strings.ContainsAny(k, "\x01\x02") {
				return 0, false
			}
			n += len(k)
		}
		if len(m.Keys) == 1 && m.Keys[0] == "" {
			return 0, false // an empty KEYS value: properties() reports it
		}
	}
	if m.DelayLevel > 0 {
		n += len(record.PropertyDelayLevel) + 2 + 20
	}
	if !wait {
		n += len(record.PropertyWaitStoreMsgOK) + 2 + len("false")
	}
	return n, n <= record.MaxPropertiesLen
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

// fromView converts a parsed record; the body is decompressed. topic
// holds the topic string of the previous record of the same response, so
// that the records of one queue share one copy.
//
// Everything is the message's own memory: v points into the pull
// response, which shares a large read buffer with other frames of the
// connection, and an application may keep a message for as long as it
// likes (a retained MQTT message, a queued delivery). A slice or string
// into v would keep the whole buffer alive with it. The body (when not
// compressed), the raw properties and the offset id are copied into one
// allocation; the body's capacity ends at its length, so appending to it
// cannot overwrite the strings that follow it. Tags, keys and the client
// id are substrings of RawProperties.
func fromView(v *record.View, brokerName string, topic *string) (*MessageExt, error) {
	born, err := v.BornAddr()
	if err != nil {
		return nil, fmt.Errorf("client: decode message: %w", err)
	}
	storeHost, err := v.StoreAddr()
	if err != nil {
		return nil, fmt.Errorf("client: decode message: %w", err)
	}
	if *topic != string(v.Topic) {
		*topic = string(v.Topic)
	}
	nb := 0
	if v.SysFlag&record.FlagCompressed == 0 {
		nb = len(v.Body)
	}
	buf := make([]byte, 0, nb+len(v.Properties)+2*(len(v.StoreHost)+8))
	buf = append(buf, v.Body[:nb]...)
	buf = append(buf, v.Properties...)
	buf = record.AppendOffsetMessageID(buf, storeHost, v.PhysicalOffset)
	var body []byte
	if v.SysFlag&record.FlagCompressed != 0 {
		b, err := record.DecompressBody(nil, v.Body, v.SysFlag, 0)
		if err != nil {
			return nil, fmt.Errorf("client: decompress message at %d: %w", v.PhysicalOffset, err)
		}
		body = b
	} else if nb > 0 {
		body = buf[:nb:nb]
	}
	np := nb + len(v.Properties)
	props := bufString(buf[nb:np])
	m := &MessageExt{
		Message:         Message{Topic: *topic, Body: body, Flag: v.Flag},
		OffsetMsgID:     bufString(buf[np:]),
		Queue:           MessageQueue{Topic: *topic, BrokerName: brokerName, QueueID: v.QueueID},
		QueueOffset:     v.QueueOffset,
		CommitLogOffset: v.PhysicalOffset,
		BornTimestamp:   v.BornTimestamp,
		StoreTimestamp:  v.StoreTimestamp,
		BornHost:        born,
		StoreHost:       storeHost,
		ReconsumeTimes:  v.ReconsumeTimes,
		SysFlag:         v.SysFlag,
	}
	m.setProperties(props)
	return m, nil
}

// setProperties sets RawProperties to props and the fields it carries:
// tags, keys, delay level, the message id (UNIQ_KEY, else OffsetMsgID)
// and the user properties.
func (m *MessageExt) setProperties(props string) {
	m.RawProperties = props
	for k, val := range record.AllProperties(props) {
		switch k {
		case record.PropertyTags:
			m.Tags = val
		case record.PropertyKeys:
			m.Keys = strings.Fields(val)
		case record.PropertyDelayLevel:
			m.DelayLevel, _ = strconv.Atoi(val)
		case record.PropertyUniqueClientMessageIDKeyIndex:
			m.MsgID = val
		}
		if !systemProperty(k) {
			if m.Properties == nil {
				m.Properties = map[string]string{}
			}
			m.Properties[k] = val
		}
	}
	if m.MsgID == "" {
		m.MsgID = m.OffsetMsgID
	}
}

// bufString is b as a string without a copy: b is a message's own buffer,
// never written after it is built.
func bufString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

var systemProperties = map[string]bool{
	record.PropertyKeys: true, record.PropertyTags: true, record.PropertyWaitStoreMsgOK: true,
	record.PropertyDelayLevel: true, record.PropertyRetryTopic: true, record.PropertyRealTopic: true,
	record.PropertyRealQueueID: true, record.PropertyTransactionPrepared: true, record.PropertyProducerGroup: true,
	record.PropertyMinOffset: true, record.PropertyMaxOffset: true, record.PropertyOriginMessageID: true,
	record.PropertyReconsumeTime: true, record.PropertyMsgRegion: true, record.PropertyTraceSwitch: true,
	record.PropertyUniqueClientMessageIDKeyIndex: true, record.PropertyMaxReconsumeTimes: true,
	record.PropertyConsumeStartTimestamp: true, record.PropertyCluster: true, record.PropertyCRC32: true,
}

func systemProperty(k string) bool { return systemProperties[k] }

// DecodeMessages decodes a pull, query or view body (commitlog records
// back to back) from the named broker; compressed bodies are inflated.
func DecodeMessages(body []byte, brokerName string) ([]*MessageExt, error) {
	return decodeMessages(body, brokerName)
}

// decodeMessages decodes a pull or query body (records back to back).
func decodeMessages(body []byte, brokerName string) ([]*MessageExt, error) {
	n := 0
	for b := body; len(b) >= record.BlankHeaderSize; n++ {
		sz, _, _ := record.PeekHeader(b)
		if sz <= 0 || int(sz) > len(b) {
			break
		}
		b = b[sz:]
	}
	out := make([]*MessageExt, 0, n)
	var topic string
	for len(body) > 0 {
		v, err := record.Parse(body, false)
		if err != nil {
			return out, fmt.Errorf("client: decode message: %w", err)
		}
		m, err := fromView(&v, brokerName, &topic)
		if err != nil {
			return out, err
		}
		out = append(out, m)
		body = body[v.TotalSize:]
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
