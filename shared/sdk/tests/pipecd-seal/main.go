// pipecd-seal seals and opens secrets with Go's standard library, making the calls PipeCD's
// pkg/crypto makes for its sealed secrets (HybridEncrypter and HybridDecrypter): RSA-OAEP
// with SHA-256 and no label around a random 32-byte key, AES-256-GCM with a zero nonce, the
// RSA part's length first (2 bytes, big-endian), all in standard base64. The Rust tests of
// gannet's own implementation (gannet_sdk::sealed) check against it in both directions.
//
//	pipecd-seal seal PUBLIC_KEY_PEM < text      prints the sealed text
//	pipecd-seal open PRIVATE_KEY_PEM < sealed   prints the text
package main

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	if len(os.Args) != 3 {
		fail(errors.New("usage: pipecd-seal seal|open KEY_PEM < input"))
	}
	keyPem, err := os.ReadFile(os.Args[2])
	if err != nil {
		fail(err)
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var out string
	switch os.Args[1] {
	case "seal":
		out, err = seal(keyPem, input)
	case "open":
		out, err = open(keyPem, strings.TrimSpace(string(input)))
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
	fmt.Print(out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pipecd-seal:", err)
	os.Exit(1)
}

func block(data []byte) ([]byte, error) {
	b, _ := pem.Decode([]byte(strings.TrimSpace(string(data))))
	if b == nil {
		return nil, errors.New("not PEM")
	}
	return b.Bytes, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	c, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(c)
}

func seal(publicPem, text []byte) (string, error) {
	der, err := block(publicPem)
	if err != nil {
		return "", err
	}
	parsed, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return "", err
	}
	public, ok := parsed.(*rsa.PublicKey)
	if !ok {
		return "", errors.New("not an RSA public key")
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	wrapped, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, public, key, nil)
	if err != nil {
		return "", err
	}
	aead, err := gcm(key)
	if err != nil {
		return "", err
	}
	out := binary.BigEndian.AppendUint16(nil, uint16(len(wrapped)))
	out = append(out, wrapped...)
	out = aead.Seal(out, make([]byte, aead.NonceSize()), text, nil)
	return base64.StdEncoding.EncodeToString(out), nil
}

func open(privatePem []byte, sealed string) (string, error) {
	der, err := block(privatePem)
	if err != nil {
		return "", err
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return "", err
	}
	private, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return "", errors.New("not an RSA private key")
	}
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		return "", err
	}
	if len(raw) < 2 {
		return "", errors.New("too short")
	}
	n := int(binary.BigEndian.Uint16(raw))
	if len(raw) < 2+n {
		return "", errors.New("too short")
	}
	key, err := rsa.DecryptOAEP(sha256.New(), rand.Reader, private, raw[2:2+n], nil)
	if err != nil {
		return "", err
	}
	aead, err := gcm(key)
	if err != nil {
		return "", err
	}
	text, err := aead.Open(nil, make([]byte, aead.NonceSize()), raw[2+n:], nil)
	if err != nil {
		return "", err
	}
	return string(text), nil
}
