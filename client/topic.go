package client

import (
	"fmt"
	"unicode/utf8"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// MaxTopicLength is the longest topic name brokers accept.
const MaxTopicLength = 127

// AutoCreateTopic is the brokers' auto-creation template topic (TBW102):
// producers send to a topic no broker has yet through its route, and a
// broker refuses to create or delete it.
const AutoCreateTopic = protocol.DefaultTopic

// MaxGroupLength is the longest consumer group name brokers accept for a
// new group: the group's retry topic, %RETRY%<group>, must be a valid
// topic name. A group of up to MaxTopicLength characters that a broker
// already keeps (taken before this limit, by SmartGo or RocketMQ) is still
// served by it: such a long group has no retry topic, so its consumers
// consume a failed message again themselves instead of sending it back.
const MaxGroupLength = MaxTopicLength - len("%RETRY%")

// ValidateGroup checks a consumer group name against the topic rule
// brokers apply to every group: 1 to MaxTopicLength (127) characters of
// [%|a-zA-Z0-9_-]. Whether a group longer than MaxGroupLength is served is
// the brokers' answer: one they already keep is, a new one is refused (a
// push consumer's Start returns that refusal). The error wraps
// ErrBadOptions.
func ValidateGroup(group string) error {
	if err := ValidateTopic(group); err != nil {
		return fmt.Errorf("%w: group name %q: want 1 to %d characters of [%%|a-zA-Z0-9_-]", ErrBadOptions, group, MaxTopicLength)
	}
	return nil
}

// longGroup reports whether group is longer than MaxGroupLength: served
// only by brokers that kept it, without a retry or dead-letter topic.
func longGroup(group string) bool { return len(group) > MaxGroupLength }

// ValidateTopic checks a topic name against the brokers' rule (RocketMQ's):
// 1 to 127 characters of [%|a-zA-Z0-9_-]. The error wraps ErrBadOptions.
func ValidateTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic name", ErrBadOptions)
	}
	if len(topic) > MaxTopicLength {
		return fmt.Errorf("%w: topic name %q is %d bytes, at most %d", ErrBadOptions, topic, len(topic), MaxTopicLength)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '%' || c == '|' || c == '_' || c == '-') {
			_, n := utf8.DecodeRuneInString(topic[i:]) // name the character, not its first byte
			return fmt.Errorf("%w: topic name %q has %q at byte %d; allowed are [%%|a-zA-Z0-9_-]", ErrBadOptions, topic, topic[i:i+n], i)
		}
	}
	return nil
}
