package client

import (
	"fmt"
	"unicode/utf8"
)

// MaxTopicLength is the longest topic name brokers accept.
const MaxTopicLength = 127

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
