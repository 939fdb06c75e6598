package protocol

import "strconv"

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
	// Resend is SmartGo's sgResend field (SendResendField), written only
	// when set.
	Resend bool
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

// DecodeSendMessageHeader decodes the send header of a SEND_MESSAGE (long
// names) or SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE / SEND_REPLY_MESSAGE_V2
// (short names) request, as the Java broker does. SEND_REPLY_MESSAGE (324)
// uses long names.
func DecodeSendMessageHeader(req *Command) (*SendMessageRequestHeader, error) {
	h := new(SendMessageRequestHeader)
	if err := DecodeSendHeader(req, h); err != nil {
		return nil, err
	}
	return h, nil
}

// DecodeSendHeader is DecodeSendMessageHeader into h.
func DecodeSendHeader(req *Command, h *SendMessageRequestHeader) error {
	return decodeSendHeader(req, h, nil)
}

// DecodeSendHeaderEscaped is DecodeSendHeader that may leave the
// properties as the request's JSON header wrote them: when esc is not
// empty, h.Properties is empty and esc is their JSON text (between the
// quotes), whose only escapes are \u0001 and \u0002, the separators
// (headershape_send.go). esc aliases the request's buffer as the header's
// strings do.
func DecodeSendHeaderEscaped(req *Command, h *SendMessageRequestHeader) (esc string, err error) {
	err = decodeSendHeader(req, h, &esc)
	return esc, err
}

func decodeSendHeader(req *Command, h *SendMessageRequestHeader, esc *string) error {
	switch req.Code {
	case SendMessageV2, SendBatchMessage, SendReplyMessageV2:
		if req.decodeSendShaped(h, true, esc) {
			return nil
		}
		return req.DecodeHeader((*SendMessageRequestHeaderV2)(h))
	default:
		if req.decodeSendShaped(h, false, esc) {
			return nil
		}
		return req.DecodeHeader(h)
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

// DefaultRegion is the MSG_REGION a broker answers its sends with (Java's
// default region).
const DefaultRegion = "DefaultRegion"

// defaultRegionHead is the text a send's answer starts with when its
// region is DefaultRegion and its trace switch on, as every answer of the
// broker is: the two members and the msgId key, one piece.
const defaultRegionHead = `"MSG_REGION":"` + DefaultRegion + `","TRACE_ON":"true","msgId":`

// appendJSONFields implements jsonFieldsAppender (written by hand, see
// headergen's OwnWriter): the bytes the generated writer would write,
// the members in key order, with the answer's constant text written as
// one piece.
func (h *SendMessageResponseHeader) appendJSONFields(dst []byte) []byte {
	switch {
	case h.Region == DefaultRegion && h.TraceOn:
		dst = append(dst, defaultRegionHead...)
	case h.Region != "":
		dst = append(dst, `"MSG_REGION":`...)
		dst = appendJSONString(dst, h.Region)
		dst = append(dst, `,"TRACE_ON":`...)
		dst = appendJSONBool(dst, h.TraceOn)
		dst = append(dst, `,"msgId":`...)
	default:
		dst = append(dst, `"msgId":`...)
	}
	dst = appendJSONString(dst, h.MsgID)
	dst = append(dst, `,"queueId":"`...)
	dst = strconv.AppendInt(dst, int64(h.QueueID), 10)
	dst = append(dst, `","queueOffset":"`...)
	dst = strconv.AppendInt(dst, h.QueueOffset, 10)
	dst = append(dst, '"')
	if h.TransactionID != "" {
		dst = append(dst, `,"transactionId":`...)
		dst = appendJSONString(dst, h.TransactionID)
	}
	return dst
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
