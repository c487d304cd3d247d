package main

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// connectTimeout bounds the first connection when the DSN sets no
// connect_timeout, so that an unreachable server fails the command rather
// than hang it.
const connectTimeout = 10 * time.Second

// database is an open pool and what must never be printed about it.
type database struct {
	*sql.DB
	redact   *redactor
	sessions *sessions
}

// Close closes the pool, then waits, at most endTimeout, until the server
// has ended every session whose connection is closed, so that a wait
// interrupted just before pgadvisory exits is not left queued on the
// server; see [sessions].
func (d *database) Close() error {
	err := d.DB.Close()
	d.sessions.await(endTimeout)
	return err
}

// openDB opens the database that dsn names: --dsn when given, else
// DATABASE_URL, else "" so that the driver reads the standard PG*
// variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE,
// PGAPPNAME, PGSERVICE, ...), as psql does. appName becomes the session's
// application_name unless the DSN or PGAPPNAME sets one. It checks that the
// server answers. Every session it opens has the server check, while a
// statement runs, that pgadvisory is still connected (see checkInterval).
// Every error it returns has passwords redacted.
func openDB(ctx context.Context, e *env, dsn, appName string) (*database, error) {
	if dsn == "" {
		dsn = e.getenv("DATABASE_URL")
	}
	r := newRedactor(dsn, e.getenv("PGPASSWORD"))
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, r.err(&connectError{errors.New("cannot read the connection string: " + err.Error())})
	}
	r.add(cfg.Password)
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = appName
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	d := &database{redact: r, sessions: new(sessions)}
	d.DB = stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(d.sessions.afterConnect))
	if err := d.PingContext(ctx); err != nil {
		d.Close()
		return nil, r.err(&connectError{err})
	}
	return d, nil
}

// errConnect matches every error of openDB: the database could not be
// reached, or refused the connection.
var errConnect = errors.New("cannot connect")

// A connectError is a failure to connect. Its message says each reason
// once: pgx tries a host again without TLS under sslmode=prefer, the
// default, and reports a refused connection once per try.
type connectError struct{ err error }

func (e *connectError) Error() string {
	lines := strings.Split(e.err.Error(), "\n")
	seen := make(map[string]bool, len(lines))
	kept := lines[:0]
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			kept = append(kept, l)
		}
	}
	if len(kept) == 2 && strings.HasSuffix(kept[0], ":") {
		// One reason left: on one line.
		return kept[0] + " " + strings.TrimSpace(kept[1])
	}
	return strings.Join(kept, "\n")
}

func (e *connectError) Unwrap() error { return e.err }

func (e *connectError) Is(target error) bool { return target == errConnect }

// A redactor removes passwords and connection strings from text meant for
// a terminal or a log.
type redactor struct {
	dsn      string // the connection string as given
	safe     string // the same with its password replaced
	secrets  []string
	replacer *strings.Replacer
}

// newRedactor returns a redactor for dsn and any further secrets, such as
// PGPASSWORD.
func newRedactor(dsn string, secrets ...string) *redactor {
	r := &redactor{dsn: dsn, safe: redactDSN(dsn)}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			r.add(p)
			if q := url.QueryEscape(p); q != p {
				r.add(q)
			}
			if q := url.PathEscape(p); q != p {
				r.add(q)
			}
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		r.add(strings.Trim(m[1], "'"))
	}
	for _, s := range secrets {
		r.add(s)
	}
	return r
}

// add makes r hide s too.
func (r *redactor) add(s string) {
	if s == "" {
		return
	}
	r.secrets = append(r.secrets, s)
	r.replacer = nil
}

// String returns s with the connection string and every secret hidden.
func (r *redactor) String(s string) string {
	if r == nil {
		return s
	}
	if r.dsn != "" && r.dsn != r.safe {
		s = strings.ReplaceAll(s, r.dsn, r.safe)
	}
	if r.replacer == nil {
		var pairs []string
		for _, secret := range r.secrets {
			pairs = append(pairs, secret, "xxxxx")
		}
		r.replacer = strings.NewReplacer(pairs...)
	}
	return r.replacer.Replace(s)
}

// err returns an error whose message is err's with every secret hidden.
// The original is not kept: nothing that prints it can leak a password.
func (r *redactor) err(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: r.String(err.Error()), kind: err}
}

// A redactedError carries a redacted message; errors.Is still sees the
// sentinels of the original, through Is, but not its text.
type redactedError struct {
	msg  string
	kind error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Is(target error) bool { return errors.Is(e.kind, target) }

// kvPassword finds the password of a keyword/value connection string.
var kvPassword = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s]+)`)

// redactDSN returns dsn with its password, if any, replaced by xxxxx.
func redactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			return u.Redacted()
		}
		// An unparsable URL: hide everything between the scheme and
		// the host.
		scheme, rest, _ := strings.Cut(dsn, "://")
		if _, host, ok := strings.Cut(rest, "@"); ok {
			return scheme + "://xxxxx@" + host
		}
		return dsn
	}
	return kvPassword.ReplaceAllString(dsn, "password=xxxxx")
}
