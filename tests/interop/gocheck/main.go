// Command gocheck checks memseal's signed checkpoints and Merkle proofs with
// Go's own transparency-log packages, golang.org/x/mod/sumdb/note and
// golang.org/x/mod/sumdb/tlog, which no one on the memseal project wrote.
//
// It reads a JSON array of cases on stdin and writes a JSON array with one
// result per case, in the same order, to stdout. A result is
// {"ok": true} or {"ok": false, "error": "..."}; note and tlog-proof results
// also list the verified and the unverified signers (name+keyid) and the
// verified text. Case kinds:
//
//	{"kind": "note", "vkeys": [VKEY, ...], "note": NOTE}
//	    note.NewVerifier for every vkey, then note.Open.
//	{"kind": "inclusion", "size": N, "index": I, "root": B64, "proof": [B64, ...],
//	 "leaf": B64 | "record": B64}
//	    tlog.CheckRecord: record I of the N-record tree with that root has the
//	    leaf hash (or the RFC 6962 leaf hash of the record's bytes, tlog.RecordHash).
//	{"kind": "consistency", "old_size": M, "new_size": N, "old_root": B64,
//	 "new_root": B64, "proof": [B64, ...]}
//	    tlog.CheckTree: the M-record tree is a prefix of the N-record tree.
//	{"kind": "tlog-proof", "vkeys": [VKEY, ...], "text": TLOG_PROOF,
//	 "origin": ORIGIN (optional), "leaf": B64 | "record": B64}
//	    a c2sp.org/tlog-proof@v1 text as `memseal prove --seq` prints it: the
//	    checkpoint is opened with note.Open, its body parsed, and the proof
//	    checked with tlog.CheckRecord.
//
// Hashes and byte strings are standard padded base64. Exit status: 0 when
// every case was evaluated (whatever the verdicts), 2 for unreadable input.
//
// Build it offline from Debian's golang-golang-x-mod-dev in GOPATH mode:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o gocheck .
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// testCase is the union of every kind's fields; unknown fields are refused
// so that a misspelt field in a test cannot silently become a zero value.
type testCase struct {
	Kind string `json:"kind"`

	Vkeys  []string `json:"vkeys"`
	Note   string   `json:"note"`
	Text   string   `json:"text"`
	Origin string   `json:"origin"`

	Size   int64    `json:"size"`
	Index  int64    `json:"index"`
	Leaf   string   `json:"leaf"`
	Record *string  `json:"record"`
	Root   string   `json:"root"`
	Proof  []string `json:"proof"`

	OldSize int64  `json:"old_size"`
	NewSize int64  `json:"new_size"`
	OldRoot string `json:"old_root"`
	NewRoot string `json:"new_root"`
}

type result struct {
	OK         bool     `json:"ok"`
	Error      string   `json:"error,omitempty"`
	Text       string   `json:"text,omitempty"`
	Signers    []string `json:"signers,omitempty"`
	Unverified []string `json:"unverified,omitempty"`
}

const tlogProofHeader = "c2sp.org/tlog-proof@v1"

func main() {
	var cases []testCase
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cases); err != nil {
		fmt.Fprintf(os.Stderr, "gocheck: reading cases: %v\n", err)
		os.Exit(2)
	}
	results := make([]result, len(cases))
	for i, c := range cases {
		var err error
		switch c.Kind {
		case "note":
			results[i], err = checkNote(c)
		case "inclusion":
			err = checkInclusion(c)
		case "consistency":
			err = checkConsistency(c)
		case "tlog-proof":
			results[i], err = checkTlogProof(c)
		default:
			fmt.Fprintf(os.Stderr, "gocheck: case %d: unknown kind %q\n", i, c.Kind)
			os.Exit(2)
		}
		results[i].OK = err == nil
		if err != nil {
			results[i].Error = err.Error()
		}
	}
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	if err := enc.Encode(results); err != nil {
		fmt.Fprintf(os.Stderr, "gocheck: writing results: %v\n", err)
		os.Exit(2)
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "gocheck: writing results: %v\n", err)
		os.Exit(2)
	}
}

// verifiers turns vkey lines into note verifiers with note.NewVerifier.
func verifiers(vkeys []string) (note.Verifiers, error) {
	list := make([]note.Verifier, 0, len(vkeys))
	for _, vkey := range vkeys {
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("vkey %q: %w", vkey, err)
		}
		list = append(list, v)
	}
	return note.VerifierList(list...), nil
}

func signerNames(sigs []note.Signature) []string {
	names := make([]string, 0, len(sigs))
	for _, s := range sigs {
		names = append(names, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
	}
	return names
}

func openNote(vkeys []string, msg string) (result, *note.Note, error) {
	known, err := verifiers(vkeys)
	if err != nil {
		return result{}, nil, err
	}
	n, err := note.Open([]byte(msg), known)
	if err != nil {
		return result{}, nil, err
	}
	r := result{Text: n.Text, Signers: signerNames(n.Sigs), Unverified: signerNames(n.UnverifiedSigs)}
	return r, n, nil
}

func checkNote(c testCase) (result, error) {
	r, _, err := openNote(c.Vkeys, c.Note)
	return r, err
}

func parseHashes(texts []string) ([]tlog.Hash, error) {
	hashes := make([]tlog.Hash, 0, len(texts))
	for i, text := range texts {
		h, err := tlog.ParseHash(text)
		if err != nil {
			return nil, fmt.Errorf("proof hash %d: %w", i, err)
		}
		hashes = append(hashes, h)
	}
	return hashes, nil
}

// leafHash is the case's leaf hash, or tlog.RecordHash of its record bytes.
func leafHash(c testCase) (tlog.Hash, error) {
	if c.Record != nil {
		if c.Leaf != "" {
			return tlog.Hash{}, errors.New("give leaf or record, not both")
		}
		data, err := base64.StdEncoding.DecodeString(*c.Record)
		if err != nil {
			return tlog.Hash{}, fmt.Errorf("record: %w", err)
		}
		return tlog.RecordHash(data), nil
	}
	h, err := tlog.ParseHash(c.Leaf)
	if err != nil {
		return tlog.Hash{}, fmt.Errorf("leaf: %w", err)
	}
	return h, nil
}

func checkInclusion(c testCase) error {
	leaf, err := leafHash(c)
	if err != nil {
		return err
	}
	root, err := tlog.ParseHash(c.Root)
	if err != nil {
		return fmt.Errorf("root: %w", err)
	}
	proof, err := parseHashes(c.Proof)
	if err != nil {
		return err
	}
	return tlog.CheckRecord(tlog.RecordProof(proof), c.Size, root, c.Index, leaf)
}

func checkConsistency(c testCase) error {
	oldRoot, err := tlog.ParseHash(c.OldRoot)
	if err != nil {
		return fmt.Errorf("old root: %w", err)
	}
	newRoot, err := tlog.ParseHash(c.NewRoot)
	if err != nil {
		return fmt.Errorf("new root: %w", err)
	}
	proof, err := parseHashes(c.Proof)
	if err != nil {
		return err
	}
	// CheckTree takes the newer tree first: (proof, t, th, n, h) proves that
	// the tree of size t with hash th contains the tree of size n with hash h.
	return tlog.CheckTree(tlog.TreeProof(proof), c.NewSize, newRoot, c.OldSize, oldRoot)
}

// parseDecimal accepts only the canonical spelling of a non-negative int64.
func parseDecimal(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, fmt.Errorf("%q is not a canonical decimal", s)
	}
	return n, nil
}

// checkpointBody parses a c2sp.org/tlog-checkpoint body: origin, size, root
// hash, then optional extension lines, each ending in a newline.
func checkpointBody(text string) (origin string, size int64, root tlog.Hash, err error) {
	if !strings.HasSuffix(text, "\n") {
		return "", 0, tlog.Hash{}, errors.New("checkpoint does not end in a newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 || lines[0] == "" {
		return "", 0, tlog.Hash{}, errors.New("checkpoint needs origin, size and root lines")
	}
	for _, ext := range lines[3:] {
		if ext == "" {
			return "", 0, tlog.Hash{}, errors.New("checkpoint has an empty extension line")
		}
	}
	size, err = parseDecimal(lines[1])
	if err != nil {
		return "", 0, tlog.Hash{}, fmt.Errorf("checkpoint size: %w", err)
	}
	root, err = tlog.ParseHash(lines[2])
	if err != nil {
		return "", 0, tlog.Hash{}, fmt.Errorf("checkpoint root: %w", err)
	}
	return lines[0], size, root, nil
}

func checkTlogProof(c testCase) (result, error) {
	// Every line of the proof part is non-empty, so the first blank line
	// separates it from the checkpoint note, which has a blank line of its own.
	head, checkpoint, found := strings.Cut(c.Text, "\n\n")
	if !found {
		return result{}, errors.New("tlog proof: no blank line before the checkpoint")
	}
	lines := strings.Split(head, "\n")
	if lines[0] != tlogProofHeader {
		return result{}, fmt.Errorf("tlog proof: first line is not %s", tlogProofHeader)
	}
	lines = lines[1:]
	if len(lines) > 0 && strings.HasPrefix(lines[0], "extra ") {
		if _, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[0], "extra ")); err != nil {
			return result{}, fmt.Errorf("tlog proof extra: %w", err)
		}
		lines = lines[1:]
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "index ") {
		return result{}, errors.New("tlog proof: no index line")
	}
	index, err := parseDecimal(strings.TrimPrefix(lines[0], "index "))
	if err != nil {
		return result{}, fmt.Errorf("tlog proof index: %w", err)
	}
	proof, err := parseHashes(lines[1:])
	if err != nil {
		return result{}, fmt.Errorf("tlog proof: %w", err)
	}

	r, n, err := openNote(c.Vkeys, checkpoint)
	if err != nil {
		return result{}, err
	}
	origin, size, root, err := checkpointBody(n.Text)
	if err != nil {
		return r, err
	}
	if c.Origin != "" && origin != c.Origin {
		return r, fmt.Errorf("checkpoint origin %q, want %q", origin, c.Origin)
	}
	leaf, err := leafHash(c)
	if err != nil {
		return r, err
	}
	return r, tlog.CheckRecord(tlog.RecordProof(proof), size, root, index, leaf)
}
