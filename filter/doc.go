// Package filter is the SQL92 message selector language of RocketMQ 4.x:
// the expressions a consumer subscribes with when its expression type is
// "SQL92", evaluated by the broker against each message's properties.
//
// The package is deterministic and does no I/O: Compile turns the text
// into an Expression, and Expression.Match decides a message from its
// encoded properties (the 0x01/0x02 string of the stored record).
//
// # Grammar
//
// The language is RocketMQ 4.9's selector grammar (itself the JMS message
// selector without arithmetic). From the loosest binding to the tightest:
//
//	selector   = or
//	or         = and { OR and }
//	and        = equality { AND equality }
//	equality   = comparison { "=" comparison | "<>" comparison | IS NULL | IS NOT NULL }
//	comparison = unary { (">" | ">=" | "<" | "<=") unary
//	                   | [NOT] BETWEEN unary AND unary
//	                   | [NOT] IN "(" string { "," string } ")" }
//	unary      = "+" unary | "-" unary | NOT unary | primary
//	primary    = literal | identifier | "(" or ")"
//	literal    = string | integer | float | TRUE | FALSE | NULL
//
// Keywords are case-insensitive. An identifier starts with a letter, "_"
// or "$" and goes on with letters, digits, "_" and "$"; it names a message
// property (TAGS is the property holding the tag). Strings are quoted with
// ' and a quote inside is doubled (”). Integers are decimal without
// leading zeros, with an optional L suffix, and must fit 64 bits; floats
// are 1.5, 1., .5, 1e10 or 1.5E-3. Comments are -- to the end of the line
// and /* ... */.
//
// Note that NOT binds tighter than comparisons, as in RocketMQ:
// "NOT a = 1" is "(NOT a) = 1"; write "NOT (a = 1)" or "a <> 1".
//
// Compile rejects, as RocketMQ does: a selector, AND/OR/NOT operand that
// cannot be boolean (a number or string literal, an arithmetic negation);
// a literal of a comparison (<, <=, >, >=, BETWEEN) that is not a number;
// a comparison whose operand is itself boolean; NULL compared with = or
// <>; a boolean literal compared with a non-boolean literal; IN whose
// left side is not a property; BETWEEN whose constant bounds are NULL or
// in the wrong order. Selectors longer than MaxLength bytes or nested
// deeper than MaxDepth are rejected too.
//
// # Evaluation
//
// Property values are strings; a missing property is NULL. Logic is
// three-valued (TRUE, FALSE, unknown): a comparison with NULL is unknown,
// NOT unknown is unknown, FALSE AND unknown is FALSE, TRUE OR unknown is
// TRUE. IS NULL is TRUE exactly when the property is missing. A message
// matches when the selector is TRUE.
//
// When the two sides of a comparison have different types the left one
// is converted to the right one's where RocketMQ does: a string property
// compared with a number is parsed as that number (an integer literal
// parses the property as a 64-bit integer, a float literal as a float);
// compared with TRUE or FALSE it is true exactly when it is "true" in any
// case. <, <=, > and >= between two strings compare them as numbers. A
// conversion that fails (comparing "abc" with 5) is an evaluation error:
// the message does not match, whatever the rest of the selector says.
// A property used alone as a condition ("WHERE a") is never TRUE, since
// property values are strings, not booleans.
//
// Where SmartGo differs from RocketMQ 4.9 it is more lenient: a float
// literal of 0.0 is accepted (RocketMQ's check against Double.MIN_VALUE
// rejects it), integer comparisons use 64 bits for every integer literal,
// and a line comment may end the text without a newline.
//
// # Tags as a first cut
//
// Expression.TagCodes reports the tag hashes a matching message must
// have, when the selector implies them (TAGS = 'a', TAGS IN ('a', 'b'),
// combined with AND and OR). The broker compares them with the tag hash
// of each consume-queue entry before it reads the message itself.
package filter
