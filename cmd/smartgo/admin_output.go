package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/smartgo/smartgo/client"
)

// mqadminTime is the layout of mqadmin's resetOffsetByTime -s (local
// time), yyyy-MM-dd#HH:mm:ss:SSS, with its last ':' read as '.': Go takes
// fractional seconds only after '.' or ',', so "05:000" would match the
// literal 000 alone and refuse every other millisecond.
const mqadminTime = "2006-01-02#15:04:05.000"

// parseTime accepts RFC 3339, unix milliseconds, a duration ago, "now" or
// mqadminTime. Negative milliseconds and negative durations are refused:
// "-1h ago" is an hour ahead, which would move a group past everything
// stored so far when "1h" was meant.
func parseTime(s string) (time.Time, error) {
	if s == "now" {
		return time.Now(), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return time.Time{}, fmt.Errorf("unix milliseconds %d are negative", ms)
		}
		return time.UnixMilli(ms), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("duration %s ago is in the future: write %s, or now to skip what is stored", s, -d)
		}
		return time.Now().Add(-d), nil
	}
	if i := strings.LastIndexByte(s, ':'); i > 0 && strings.IndexByte(s, '#') > 0 {
		if t, err := time.ParseInLocation(mqadminTime, s[:i]+"."+s[i+1:], time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want RFC 3339, unix milliseconds, a duration such as 1h, now, or mqadmin's yyyy-MM-dd#HH:mm:ss:SSS")
}

func fmtMillis(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// fmtISOTime shows an RFC 3339 time of the twin API as fmtMillis does: the
// IoT Hub convention for "never" (0001-01-01T00:00:00Z) and any time
// before 1970 as "-"; text that is no RFC 3339 time as it is.
func fmtISOTime(s string) string {
	if s == "" {
		return "-"
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return fmtMillis(t.UnixMilli())
}

// output renders results as an aligned table or as JSON.
type output struct {
	w    io.Writer
	json bool
	err  error
}

func (o *output) writeJSON(v any) {
	v = emptyNotNull(v)
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		o.err = err
		return
	}
	_, o.err = fmt.Fprintf(o.w, "%s\n", b)
}

// emptyNotNull turns a nil slice or map, at the top or as a value of a
// map[string]any, into an empty one, so that an empty result prints as []
// or {} (what scripts iterate over), not null.
func emptyNotNull(v any) any {
	rv := reflect.ValueOf(v)
	switch {
	case !rv.IsValid():
		return v
	case rv.Kind() == reflect.Slice && rv.IsNil():
		return reflect.MakeSlice(rv.Type(), 0, 0).Interface()
	case rv.Kind() == reflect.Map && rv.IsNil():
		return reflect.MakeMap(rv.Type()).Interface()
	}
	if m, ok := v.(map[string]any); ok {
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[k] = emptyNotNull(x)
		}
		return out
	}
	return v
}

func (o *output) table(v any, header []string, rows func(add func(...any))) {
	if o.json {
		o.writeJSON(v)
		return
	}
	tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	rows(func(cells ...any) {
		parts := make([]string, len(cells))
		for i, c := range cells {
			parts[i] = fmt.Sprint(c)
		}
		fmt.Fprintln(tw, strings.Join(parts, "\t"))
	})
	o.err = tw.Flush()
}

func (o *output) message(v any, text string) {
	if o.json {
		o.writeJSON(v)
		return
	}
	_, o.err = fmt.Fprintln(o.w, text)
}

type jsonMessage struct {
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	Topic          string            `json:"topic"`
	Broker         string            `json:"broker"`
	QueueID        int32             `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	Tags           string            `json:"tags,omitempty"`
	Keys           []string          `json:"keys,omitempty"`
	BornTimestamp  int64             `json:"bornTimestamp"`
	StoreTimestamp int64             `json:"storeTimestamp"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	Properties     map[string]string `json:"properties,omitempty"`
	// Body is the body when it is valid UTF-8; BodyBase64 (standard
	// base64) when it is not, so a binary body comes out byte for byte
	// instead of with U+FFFD in place of its bytes.
	Body       *string `json:"body,omitempty"`
	BodyBase64 []byte  `json:"bodyBase64,omitempty"`
}

func (o *output) messages(msgs []*client.MessageExt) {
	js := make([]jsonMessage, 0, len(msgs))
	for _, m := range msgs {
		js = append(js, jsonMessage{MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, Topic: m.Topic, Broker: m.Queue.BrokerName,
			QueueID: m.Queue.QueueID, QueueOffset: m.QueueOffset, Tags: m.Tags, Keys: m.Keys, BornTimestamp: m.BornTimestamp,
			StoreTimestamp: m.StoreTimestamp, ReconsumeTimes: m.ReconsumeTimes, Properties: m.Properties})
		if j := &js[len(js)-1]; utf8.Valid(m.Body) {
			body := string(m.Body)
			j.Body = &body
		} else {
			j.BodyBase64 = m.Body
		}
	}
	o.table(js, []string{"MSG_ID", "OFFSET_MSG_ID", "TOPIC", "QUEUE", "OFFSET", "TAGS", "KEYS", "STORED", "BODY"}, func(add func(...any)) {
		for _, m := range js {
			body := m.BodyBase64
			if m.Body != nil {
				body = []byte(*m.Body)
			}
			add(m.MsgID, m.OffsetMsgID, m.Topic, fmt.Sprintf("%s:%d", m.Broker, m.QueueID), m.QueueOffset, m.Tags,
				strings.Join(m.Keys, " "), fmtMillis(m.StoreTimestamp), quoteCut(body))
		}
	})
}

// quoteCut is a body, payload or value as a table shows it: Go-quoted,
// its first 45 bytes and "..." when it is longer than 48, cut before a
// UTF-8 character rather than through it (which showed as \xc3...).
func quoteCut(b []byte) string {
	if len(b) > 48 {
		n := 45
		for n > 42 && !utf8.RuneStart(b[n]) {
			n--
		}
		return strconv.Quote(string(b[:n]) + "...")
	}
	return strconv.Quote(string(b))
}
