package sqlcheck

import "strings"

// kind is what a token is.
type kind uint8

const (
	name   kind = iota // a possibly qualified identifier
	str                // a string literal
	punct              // an operator or punctuation: "(", "::", ";", "<>", ...
	number             // a number or a parameter such as $1
)

// A token is one lexical item of a statement. A name holds its parts,
// unquoted parts folded to lower case as PostgreSQL folds them; a string
// literal holds its content; punctuation its text.
type token struct {
	kind   kind
	parts  []string
	quoted bool   // for a name: whether any part was quoted
	text   string // for str and punct
}

// word returns the token as a keyword: the lower-case text of a name of
// one unquoted part, or "".
func (t token) word() string {
	if t.kind == name && len(t.parts) == 1 && !t.quoted {
		return t.parts[0]
	}
	return ""
}

// lex splits query into tokens, dropping whitespace and comments, and
// joins the parts of a qualified name ("pg_catalog" "." "pg_locks") into
// one token.
func lex(query string) []token {
	var toks []token
	s := query
	for len(s) > 0 {
		c := s[0]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			s = s[1:]
		case strings.HasPrefix(s, "--"):
			if i := strings.IndexByte(s, '\n'); i >= 0 {
				s = s[i+1:]
			} else {
				s = ""
			}
		case strings.HasPrefix(s, "/*"):
			if i := strings.Index(s[2:], "*/"); i >= 0 {
				s = s[i+4:]
			} else {
				s = ""
			}
		case c == '\'':
			var lit string
			lit, s = quotedRun(s, '\'')
			toks = append(toks, token{kind: str, text: lit})
		case c == '"':
			var id string
			id, s = quotedRun(s, '"')
			toks = appendPart(toks, id, true)
		case c == '$':
			if tag, ok := dollarTag(s); ok {
				end := strings.Index(s[len(tag):], tag)
				if end < 0 {
					toks = append(toks, token{kind: str, text: s[len(tag):]})
					s = ""
				} else {
					toks = append(toks, token{kind: str, text: s[len(tag) : len(tag)+end]})
					s = s[len(tag)+end+len(tag):]
				}
				break
			}
			n := 1
			for n < len(s) && isDigit(s[n]) {
				n++
			}
			toks = append(toks, token{kind: number, text: s[:n]})
			s = s[n:]
		case isIdentStart(c):
			n := 1
			for n < len(s) && isIdentPart(s[n]) {
				n++
			}
			toks = appendPart(toks, strings.ToLower(s[:n]), false)
			s = s[n:]
		case isDigit(c):
			n := 1
			for n < len(s) && (isDigit(s[n]) || s[n] == '.' || s[n] == 'e' || s[n] == 'E') {
				n++
			}
			toks = append(toks, token{kind: number, text: s[:n]})
			s = s[n:]
		case strings.ContainsRune("(),;[].", rune(c)):
			toks = append(toks, token{kind: punct, text: s[:1]})
			s = s[1:]
		case c == ':' && strings.HasPrefix(s, "::"):
			toks = append(toks, token{kind: punct, text: "::"})
			s = s[2:]
		default:
			n := 1
			for n < len(s) && strings.IndexByte("+-*/<>=~!@#%^&|`?:", s[n]) >= 0 {
				n++
			}
			toks = append(toks, token{kind: punct, text: s[:n]})
			s = s[n:]
		}
	}
	return toks
}

// appendPart appends an identifier, as the next part of the name before
// it when a "." joins them.
func appendPart(toks []token, part string, quoted bool) []token {
	if n := len(toks); n >= 2 && toks[n-1].kind == punct && toks[n-1].text == "." && toks[n-2].kind == name {
		prev := &toks[n-2]
		prev.parts = append(prev.parts, part)
		prev.quoted = prev.quoted || quoted
		return toks[:n-1]
	}
	return append(toks, token{kind: name, parts: []string{part}, quoted: quoted})
}

// quotedRun reads the run that s starts with, quoted by q, in which a
// doubled q stands for itself. It returns the content and the rest of s.
func quotedRun(s string, q byte) (content, rest string) {
	var b strings.Builder
	i := 1
	for i < len(s) {
		if s[i] == q {
			if i+1 < len(s) && s[i+1] == q {
				b.WriteByte(q)
				i += 2
				continue
			}
			return b.String(), s[i+1:]
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String(), ""
}

// dollarTag returns the opening tag of a dollar-quoted string at the start
// of s ("$$" or "$tag$"), if s starts with one.
func dollarTag(s string) (string, bool) {
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '$':
			return s[:i+1], true
		case isDigit(s[i]) && i == 1, !isIdentPart(s[i]):
			return "", false
		}
	}
	return "", false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isIdentStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }
