/* The bare-metal support that firmware built by scripts/run-cortexm uses on QEMU's Cortex-M
 * boards: startup (startup.c), semihosting console and exit (semihost.c), a tick counter.
 * The boards, memory maps and semihosting calls are described in docs/cortexm.md. */
#ifndef TTH_CORTEXM_H_
#define TTH_CORTEXM_H_

#include <stddef.h>
#include <stdint.h>

/* Large zero-initialized objects (workspaces, output buffers) go into the board's biggest RAM
 * instead of the RAM that also holds the stack: put TTH_CM_BIG on their definition. */
#define TTH_CM_BIG __attribute__((section(".bss.tth_big")))

/* Console output through semihosting (SYS_WRITE0). */
void tth_cm_puts(const char *s);
/* s, then v as 8 hexadecimal digits, then a newline */
void tth_cm_put_hex32(const char *s, uint32_t v);
/* s, then v in decimal, then a newline */
void tth_cm_put_dec(const char *s, uint64_t v);
/* n bytes as lowercase hexadecimal, 64 bytes (128 digits) a line */
void tth_cm_put_bytes_hex(const void *p, size_t n);

/* Ends the program: QEMU exits with this status (SYS_EXIT_EXTENDED; SYS_EXIT where that is
 * missing, which can only say 0 or 1). Checks the stack guard first: a stack that grew past its
 * limit ends the program with status TTH_CM_EXIT_STACK. */
__attribute__((noreturn)) void tth_cm_exit(int status);

/* SysTick ticks since reset on the processor clock, 64 bits (wraps of the 24-bit counter are
 * counted by the SysTick interrupt). Under QEMU with -icount shift=0 the clock advances one
 * nanosecond per instruction, so ticks * (1e9 / TTH_CM_CPU_HZ) is an instruction count. */
uint64_t tth_cm_ticks(void);

/* The low 32 bits of tth_cm_ticks: the counter a profiling artifact's timing hooks read when
 * scripts/run-cortexm --profile defines TTH_<MODEL>_PROFILE_CLOCK to it (QEMU has no DWT cycle
 * counter: docs/profiling.md, "Bare metal"). */
uint32_t tth_cm_profile_clock(void);

/* The highest stack use so far in bytes (the stack is painted at reset), and its size. */
size_t tth_cm_stack_used(void);
size_t tth_cm_stack_size(void);

/* exit statuses of the support code itself (main's own statuses should stay below 64) */
#define TTH_CM_EXIT_FAULT 100 /* a fault handler ran */
#define TTH_CM_EXIT_STACK 101 /* the stack grew past its limit */
#define TTH_CM_EXIT_ABORT 102 /* abort(), or an exception that should never happen */

#endif
