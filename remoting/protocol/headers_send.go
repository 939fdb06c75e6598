package protocol

// Producer-side headers: SEND_MESSAGE (long names), SEND_MESSAGE_V2 /
// SEND_BATCH_MESSAGE / SEND_REPLY_MESSAGE_V2 (short names a..n), their
// response, and the transaction headers.

// SendMessageRequestHeader is the SEND_MESSAGE (10) header with long field
// names: producerGroup!, topic!, defaultTopic!, defaultTopicQueueNums!,
// queueId!, sysFlag!, bornTimestamp!, flag!, properties, reconsumeTimes,
// unitMode, batch, maxReconsumeTimes, bname.
type SendMessageRequestHeader struct {
	ProducerGroup         string
	Topic                 string
	DefaultTopic          string
	DefaultTopicQueueNums int32
	QueueID               int32
	SysFlag               int32
	BornTimestamp         int64
	Flag                  int32
	Properties            string
	ReconsumeTimes        int32
	UnitMode              bool
	Batch                 bool
	// MaxReconsumeTimes is valid only when HasMaxReconsumeTimes is set
	// (absent means "use the group's setting").
	MaxReconsumeTimes    int32
	HasMaxReconsumeTimes bool
	BrokerName           string
}

func (h *SendMessageRequestHeader) numFields() int { return 14 }

// EncodeFields implements HeaderEncoder.
func (h *SendMessageRequestHeader) EncodeFields(f ExtFields) {
	f["producerGroup"] = h.ProducerGroup
	f["topic"] = h.Topic
	f["defaultTopic"] = h.DefaultTopic
	putI32(f, "defaultTopicQueueNums", h.DefaultTopicQueueNums)
	putI32(f, "queueId", h.QueueID)
	putI32(f, "sysFlag", h.SysFlag)
	putI64(f, "bornTimestamp", h.BornTimestamp)
	putI32(f, "flag", h.Flag)
	putOptStr(f, "properties", h.Properties)
	putI32(f, "reconsumeTimes", h.ReconsumeTimes)
	putBool(f, "unitMode", h.UnitMode)
	putBool(f, "batch", h.Batch)
	if h.HasMaxReconsumeTimes {
		putI32(f, "maxReconsumeTimes", h.MaxReconsumeTimes)
	}
	putOptStr(f, "bname", h.BrokerName)
}

// DecodeFields implements HeaderDecoder.
func (h *SendMessageRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "SendMessageRequestHeader"}
	h.ProducerGroup = r.str("producerGroup", true)
	h.Topic = r.str("topic", true)
	h.DefaultTopic = r.str("defaultTopic", true)
	h.DefaultTopicQueueNums = r.i32("defaultTopicQueueNums", true)
	h.QueueID = r.i32("queueId", true)
	h.SysFlag = r.i32("sysFlag", true)
	h.BornTimestamp = r.i64("bornTimestamp", true)
	h.Flag = r.i32("flag", true)
	h.Properties = r.str("properties", false)
	h.ReconsumeTimes = r.i32("reconsumeTimes", false)
	h.UnitMode = r.boolean("unitMode", false)
	h.Batch = r.boolean("batch", false)
	h.MaxReconsumeTimes, h.HasMaxReconsumeTimes = r.optI32("maxReconsumeTimes")
	h.BrokerName = r.str("bname", false)
	return r.err
}

// SendMessageRequestHeaderV2 is the same header with the short names used
// by SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
// SEND_REPLY_MESSAGE_V2 (325): a producerGroup!, b topic!, c defaultTopic!,
// d defaultTopicQueueNums!, e queueId!, f sysFlag!, g bornTimestamp!,
// h flag!, i properties, j reconsumeTimes, k unitMode, l maxReconsumeTimes,
// m batch, n brokerName.
type SendMessageRequestHeaderV2 SendMessageRequestHeader

// V2 converts a long-name header to the short-name form.
func (h *SendMessageRequestHeader) V2() *SendMessageRequestHeaderV2 {
	v := SendMessageRequestHeaderV2(*h)
	return &v
}

// V1 converts a short-name header to the long-name form.
func (h *SendMessageRequestHeaderV2) V1() *SendMessageRequestHeader {
	v := SendMessageRequestHeader(*h)
	return &v
}

func (h *SendMessageRequestHeaderV2) numFields() int { return 14 }

// EncodeFields implements HeaderEncoder.
func (h *SendMessageRequestHeaderV2) EncodeFields(f ExtFields) {
	f["a"] = h.ProducerGroup
	f["b"] = h.Topic
	f["c"] = h.DefaultTopic
	putI32(f, "d", h.DefaultTopicQueueNums)
	putI32(f, "e", h.QueueID)
	putI32(f, "f", h.SysFlag)
	putI64(f, "g", h.BornTimestamp)
	putI32(f, "h", h.Flag)
	putOptStr(f, "i", h.Properties)
	putI32(f, "j", h.ReconsumeTimes)
	putBool(f, "k", h.UnitMode)
	if h.HasMaxReconsumeTimes {
		putI32(f, "l", h.MaxReconsumeTimes)
	}
	putBool(f, "m", h.Batch)
	putOptStr(f, "n", h.BrokerName)
}

// DecodeFields implements HeaderDecoder.
func (h *SendMessageRequestHeaderV2) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "SendMessageRequestHeaderV2"}
	h.ProducerGroup = r.str("a", true)
	h.Topic = r.str("b", true)
	h.DefaultTopic = r.str("c", true)
	h.DefaultTopicQueueNums = r.i32("d", true)
	h.QueueID = r.i32("e", true)
	h.SysFlag = r.i32("f", true)
	h.BornTimestamp = r.i64("g", true)
	h.Flag = r.i32("h", true)
	h.Properties = r.str("i", false)
	h.ReconsumeTimes = r.i32("j", false)
	h.UnitMode = r.boolean("k", false)
	h.MaxReconsumeTimes, h.HasMaxReconsumeTimes = r.optI32("l")
	h.Batch = r.boolean("m", false)
	h.BrokerName = r.str("n", false)
	return r.err
}

// DecodeSendMessageHeader decodes the send header of a SEND_MESSAGE (long
// names) or SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE / SEND_REPLY_MESSAGE_V2
// (short names) request, as the Java broker does. SEND_REPLY_MESSAGE (324)
// uses long names.
func DecodeSendMessageHeader(req *Command) (*SendMessageRequestHeader, error) {
	switch req.Code {
	case SendMessageV2, SendBatchMessage, SendReplyMessageV2:
		var v2 SendMessageRequestHeaderV2
		if err := v2.DecodeFields(req.ExtFields); err != nil {
			return nil, err
		}
		return v2.V1(), nil
	default:
		h := new(SendMessageRequestHeader)
		if err := h.DecodeFields(req.ExtFields); err != nil {
			return nil, err
		}
		return h, nil
	}
}

// SendResendField is a SmartGo extField of any send request: "true" marks
// a retry after an attempt whose outcome the producer does not know (the
// connection broke or timed out after the request may have been written).
// A broker that already stored a message with the same UNIQ_KEY in the
// topic answers with that message instead of storing it again, so a retry
// across a failover does not duplicate. Other brokers ignore the field.
const SendResendField = "sgResend"

// SendMessageResponseHeader answers a send: msgId!, queueId!, queueOffset!,
// transactionId. Java brokers also add MSG_REGION and TRACE_ON; Region and
// TraceOn carry them (written when Region is set).
type SendMessageResponseHeader struct {
	MsgID         string
	QueueID       int32
	QueueOffset   int64
	TransactionID string
	Region        string
	TraceOn       bool
}

// EncodeFields implements HeaderEncoder.
func (h *SendMessageResponseHeader) EncodeFields(f ExtFields) {
	f["msgId"] = h.MsgID
	putI32(f, "queueId", h.QueueID)
	putI64(f, "queueOffset", h.QueueOffset)
	putOptStr(f, "transactionId", h.TransactionID)
	if h.Region != "" {
		f["MSG_REGION"] = h.Region
		putBool(f, "TRACE_ON", h.TraceOn)
	}
}

// DecodeFields implements HeaderDecoder.
func (h *SendMessageResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "SendMessageResponseHeader"}
	h.MsgID = r.str("msgId", true)
	h.QueueID = r.i32("queueId", true)
	h.QueueOffset = r.i64("queueOffset", true)
	h.TransactionID = r.str("transactionId", false)
	h.Region = r.str("MSG_REGION", false)
	h.TraceOn = r.boolean("TRACE_ON", false)
	return r.err
}

// EndTransactionRequestHeader is END_TRANSACTION (37): producerGroup!,
// tranStateTableOffset!, commitLogOffset!, commitOrRollback!,
// fromTransactionCheck, msgId!, transactionId.
type EndTransactionRequestHeader struct {
	ProducerGroup        string
	TranStateTableOffset int64
	CommitLogOffset      int64
	CommitOrRollback     int32
	FromTransactionCheck bool
	MsgID                string
	TransactionID        string
}

// EncodeFields implements HeaderEncoder.
func (h *EndTransactionRequestHeader) EncodeFields(f ExtFields) {
	f["producerGroup"] = h.ProducerGroup
	putI64(f, "tranStateTableOffset", h.TranStateTableOffset)
	putI64(f, "commitLogOffset", h.CommitLogOffset)
	putI32(f, "commitOrRollback", h.CommitOrRollback)
	putBool(f, "fromTransactionCheck", h.FromTransactionCheck)
	f["msgId"] = h.MsgID
	putOptStr(f, "transactionId", h.TransactionID)
}

// DecodeFields implements HeaderDecoder.
func (h *EndTransactionRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "EndTransactionRequestHeader"}
	h.ProducerGroup = r.str("producerGroup", true)
	h.TranStateTableOffset = r.i64("tranStateTableOffset", true)
	h.CommitLogOffset = r.i64("commitLogOffset", true)
	h.CommitOrRollback = r.i32("commitOrRollback", true)
	h.FromTransactionCheck = r.boolean("fromTransactionCheck", false)
	h.MsgID = r.str("msgId", true)
	h.TransactionID = r.str("transactionId", false)
	return r.err
}

// CheckTransactionStateRequestHeader is CHECK_TRANSACTION_STATE (39, broker
// to producer): tranStateTableOffset!, commitLogOffset!, msgId,
// transactionId, offsetMsgId.
type CheckTransactionStateRequestHeader struct {
	TranStateTableOffset int64
	CommitLogOffset      int64
	MsgID                string
	TransactionID        string
	OffsetMsgID          string
}

// EncodeFields implements HeaderEncoder.
func (h *CheckTransactionStateRequestHeader) EncodeFields(f ExtFields) {
	putI64(f, "tranStateTableOffset", h.TranStateTableOffset)
	putI64(f, "commitLogOffset", h.CommitLogOffset)
	putOptStr(f, "msgId", h.MsgID)
	putOptStr(f, "transactionId", h.TransactionID)
	putOptStr(f, "offsetMsgId", h.OffsetMsgID)
}

// DecodeFields implements HeaderDecoder.
func (h *CheckTransactionStateRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "CheckTransactionStateRequestHeader"}
	h.TranStateTableOffset = r.i64("tranStateTableOffset", true)
	h.CommitLogOffset = r.i64("commitLogOffset", true)
	h.MsgID = r.str("msgId", false)
	h.TransactionID = r.str("transactionId", false)
	h.OffsetMsgID = r.str("offsetMsgId", false)
	return r.err
}
