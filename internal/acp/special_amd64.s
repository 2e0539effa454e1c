#include "textflag.h"

// SPECIAL sets in AX a bit for each byte of X0 that is a quote (X1), a
// backslash (X2) or below 0x20: x == min(x, 0x1f) (X3).
#define SPECIAL \
	MOVO X0, X4 \
	PCMPEQB X1, X4 \
	MOVO X0, X5 \
	PCMPEQB X2, X5 \
	POR X5, X4 \
	MOVO X0, X6 \
	PMINUB X3, X6 \
	PCMPEQB X0, X6 \
	POR X6, X4 \
	PMOVMSKB X4, AX

// func specialIndex(b []byte) int
// The offset of the first byte of b that is a quote, a backslash or below
// 0x20, or len(b); len(b) is at least 16. With SSE2, 16 bytes at a time;
// the last 16 bytes are read again where the length is not a multiple.
TEXT ·specialIndex(SB), NOSPLIT, $0-32
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), BX
	MOVQ SI, DI
	LEAQ -16(SI)(BX*1), R8 // the last block's start
	MOVQ $0x2222222222222222, AX
	MOVQ AX, X1
	PUNPCKLQDQ X1, X1
	MOVQ $0x5c5c5c5c5c5c5c5c, AX
	MOVQ AX, X2
	PUNPCKLQDQ X2, X2
	MOVQ $0x1f1f1f1f1f1f1f1f, AX
	MOVQ AX, X3
	PUNPCKLQDQ X3, X3

loop:
	CMPQ SI, R8
	JA   last
	MOVOU (SI), X0
	SPECIAL
	TESTL AX, AX
	JNZ   found
	ADDQ  $16, SI
	JMP   loop

last:
	// SI-R8 bytes of the last block were read already: their bits go.
	MOVQ SI, CX
	SUBQ R8, CX
	CMPQ CX, $16
	JAE  none
	MOVOU (R8), X0
	SPECIAL
	SHRL  CX, AX
	TESTL AX, AX
	JZ    none

found:
	BSFL AX, AX
	SUBQ DI, SI
	ADDQ SI, AX
	MOVQ AX, ret+24(FP)
	RET

none:
	MOVQ BX, ret+24(FP)
	RET
