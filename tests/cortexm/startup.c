/* Startup code for the firmware scripts/run-cortexm builds for QEMU's Cortex-M boards
 * (mps2-an386: Cortex-M4, mps3-an547: Cortex-M55): the vector table, Reset_Handler (FPU and
 * MVE access, .data copied, .bss zeroed, the stack painted, faults enabled, SysTick started,
 * main called, its status given to the emulator), fault handlers that say which fault and exit
 * non-zero, and the SysTick tick counter. The register addresses and bits are listed in
 * docs/cortexm.md; the linker scripts (mps2-an386.ld, mps3-an547.ld, sections.ld) define the
 * symbols used here. */
#include <stddef.h>
#include <stdint.h>

#include "cortexm.h"

#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
#define TTH_CM_V8M 1
#else
#define TTH_CM_V8M 0
#endif

#define REG(a) (*(volatile uint32_t *)(uintptr_t)(a))
#define SCB_ICSR REG(0xE000ED04u)
#define SCB_VTOR REG(0xE000ED08u)
#define SCB_CCR REG(0xE000ED14u)
#define SCB_SHCSR REG(0xE000ED24u)
#define SCB_CFSR REG(0xE000ED28u)
#define SCB_HFSR REG(0xE000ED2Cu)
#define SCB_MMFAR REG(0xE000ED34u)
#define SCB_BFAR REG(0xE000ED38u)
#define SCB_CPACR REG(0xE000ED88u)
#define SCB_SFSR REG(0xE000EDE4u) /* Armv8-M Security Extension */
#define SCB_SFAR REG(0xE000EDE8u)
#define MPU_CTRL REG(0xE000ED94u) /* the MPU: PMSAv7 on Armv7-M, PMSAv8 on Armv8-M */
#define MPU_RNR REG(0xE000ED98u)
#define MPU_RBAR REG(0xE000ED9Cu)
#define MPU_RASR REG(0xE000EDA0u) /* PMSAv7 */
#define MPU_RLAR REG(0xE000EDA0u) /* PMSAv8 */
#define MPU_MAIR0 REG(0xE000EDC0u) /* PMSAv8 */
#define SYST_CSR REG(0xE000E010u)
#define SYST_RVR REG(0xE000E014u)
#define SYST_CVR REG(0xE000E018u)

#define CPACR_CP10_CP11_FULL (0xFu << 20)
#define SHCSR_MEMFAULTENA (1u << 16)
#define SHCSR_BUSFAULTENA (1u << 17)
#define SHCSR_USGFAULTENA (1u << 18)
#define SHCSR_SECUREFAULTENA (1u << 19)
#define CCR_DIV_0_TRP (1u << 4)
#define ICSR_PENDSTSET (1u << 26)
#define MPU_CTRL_ENABLE (1u << 0)
#define MPU_CTRL_PRIVDEFENA (1u << 2)
#define MPU_RASR_ENABLE (1u << 0)
#define MPU_RASR_SIZE(log2) (((log2)-1u) << 1)
#define MPU_RASR_AP_NONE (0u << 24)
#define MPU_RASR_AP_RO (6u << 24) /* read-only, privileged and unprivileged */
#define MPU_RASR_C (1u << 17)    /* with TEX 0, B 0: normal memory, write-through */
#define MPU_RASR_XN (1u << 28)
#define MPU_RBAR_AP_RO (3u << 1) /* PMSAv8: read-only, privileged and unprivileged */
#define MPU_RBAR_XN (1u << 0)
#define MPU_RLAR_EN (1u << 0)    /* with AttrIndx 0 */
#define MAIR_NORMAL_NONCACHEABLE 0x44u
#define STACK_GUARD_LOG2 13u /* 8 KiB, as in sections.ld */
#define SYST_ENABLE (1u << 0)
#define SYST_TICKINT (1u << 1)
#define SYST_CLKSOURCE_CPU (1u << 2)
/* the reload value: the 24-bit maximum (a smaller one, with -D, makes wraps frequent to test
 * tth_cm_ticks across them) */
#ifndef TTH_CM_SYSTICK_RELOAD
#define TTH_CM_SYSTICK_RELOAD 0xFFFFFFu
#endif
#define SYST_MAX TTH_CM_SYSTICK_RELOAD

#define STACK_PAINT 0x57AC57ACu
#define STACK_GUARD_WORDS 8u

/* from the linker script */
extern uint32_t __data_start[], __data_end[], __data_load[];
extern uint32_t __bss_start[], __bss_end[], __big_start[], __big_end[];
extern uint32_t __stack_limit[], __stack_top[], __stack_guard[], __ram_start[], __ram_end[];
extern uint32_t __rodata_mem_start[], __rodata_mem_end[];
extern void (*__init_array_start[])(void);
extern void (*__init_array_end[])(void);

int main(void);

void Reset_Handler(void);
void NMI_Handler(void);
void HardFault_Handler(void);
void MemManage_Handler(void);
void BusFault_Handler(void);
void UsageFault_Handler(void);
void SecureFault_Handler(void);
void Default_Handler(void);
void SysTick_Handler(void);

/* The vector table: the initial main stack pointer, then one handler address per exception
 * number (1 Reset ... 15 SysTick), then the external interrupts (none is enabled). */
#define EXTERNAL_IRQS 32
struct vector_table {
    uint32_t *initial_sp;
    void (*handler[15 + EXTERNAL_IRQS])(void);
};

#define IRQ8                                                                                  \
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,       \
        Default_Handler, Default_Handler, Default_Handler

__attribute__((section(".vectors"), used)) const struct vector_table tth_cm_vectors = {
    __stack_top,
    {
        Reset_Handler,       /*  1 Reset */
        NMI_Handler,         /*  2 NMI */
        HardFault_Handler,   /*  3 HardFault */
        MemManage_Handler,   /*  4 MemManage */
        BusFault_Handler,    /*  5 BusFault */
        UsageFault_Handler,  /*  6 UsageFault */
        SecureFault_Handler, /*  7 SecureFault (Armv8-M; reserved on Armv7-M) */
        Default_Handler,     /*  8 reserved */
        Default_Handler,     /*  9 reserved */
        Default_Handler,     /* 10 reserved */
        Default_Handler,     /* 11 SVCall */
        Default_Handler,     /* 12 DebugMonitor */
        Default_Handler,     /* 13 reserved */
        Default_Handler,     /* 14 PendSV */
        SysTick_Handler,     /* 15 SysTick */
        IRQ8, IRQ8, IRQ8, IRQ8, /* 16-47 external interrupts 0-31 */
    },
};

__attribute__((noreturn, noinline)) static void start(void);

/* Runs first, on the stack the vector table names. CP10 and CP11 (CPACR bits 20-23) give access
 * to the FPU and, on Armv8.1-M, to MVE: they are set before any code that may use them (the
 * compiler may vectorize the copy loops of start() with MVE on a Cortex-M55). */
void Reset_Handler(void)
{
    SCB_CPACR |= CPACR_CP10_CP11_FULL;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    start();
}

static void *current_sp(void)
{
    void *sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    return sp;
}

static void start(void)
{
    /* The MPU makes the memory of the constants (and the embedded inputs) read-only: a write
     * there is a MemManage fault, on the M4 as on the M55, whose QSPI flash is ROM in QEMU and
     * would ignore it silently. Everything else keeps the default memory map (PRIVDEFENA); the
     * MPU is off in HardFault and NMI handlers. */
    uint32_t ro_start = (uint32_t)(uintptr_t)__rodata_mem_start;
    uint32_t ro_size = (uint32_t)((uintptr_t)__rodata_mem_end - (uintptr_t)__rodata_mem_start);
#if TTH_CM_V8M
    /* the main stack's limit: growing past it is a UsageFault (STKOF) instead of silent damage */
    __asm__ volatile("msr msplim, %0" ::"r"(__stack_limit));
    MPU_MAIR0 = MAIR_NORMAL_NONCACHEABLE; /* attribute 0 */
    MPU_RNR = 0;
    MPU_RBAR = ro_start | MPU_RBAR_AP_RO | MPU_RBAR_XN;
    MPU_RLAR = ((ro_start + ro_size - 1u) & ~0x1Fu) | MPU_RLAR_EN;
#else
    /* region 0: the 8 KiB below the stack, no access; region 1: the constants' memory (a power
     * of two, aligned to its size), read-only */
    MPU_RNR = 0;
    MPU_RBAR = (uint32_t)(uintptr_t)__stack_guard;
    MPU_RASR = MPU_RASR_XN | MPU_RASR_AP_NONE | MPU_RASR_SIZE(STACK_GUARD_LOG2) | MPU_RASR_ENABLE;
    MPU_RNR = 1;
    MPU_RBAR = ro_start;
    MPU_RASR = MPU_RASR_AP_RO | MPU_RASR_C | MPU_RASR_SIZE((uint32_t)__builtin_ctz(ro_size)) |
               MPU_RASR_ENABLE;
#endif
    MPU_CTRL = MPU_CTRL_PRIVDEFENA | MPU_CTRL_ENABLE;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    for (uint32_t *s = __data_load, *d = __data_start; d < __data_end;)
        *d++ = *s++;
    for (uint32_t *d = __bss_start; d < __bss_end;)
        *d++ = 0;
    for (uint32_t *d = __big_start; d < __big_end;)
        *d++ = 0;
    /* paint the stack below the frames in use, for tth_cm_stack_used and the guard */
    for (volatile uint32_t *d = __stack_limit; (void *)d < (void *)((char *)current_sp() - 256);)
        *d++ = STACK_PAINT;

    SCB_VTOR = (uint32_t)(uintptr_t)&tth_cm_vectors;
    /* MemManage, BusFault, UsageFault (and SecureFault) get their own handlers instead of
     * escalating to HardFault; an integer division by zero traps instead of giving 0 */
    SCB_SHCSR |= SHCSR_MEMFAULTENA | SHCSR_BUSFAULTENA | SHCSR_USGFAULTENA |
                 (TTH_CM_V8M ? SHCSR_SECUREFAULTENA : 0u);
    SCB_CCR |= CCR_DIV_0_TRP;
    __asm__ volatile("dsb\n\tisb" ::: "memory");

    SYST_RVR = SYST_MAX;
    SYST_CVR = 0;
    SYST_CSR = SYST_ENABLE | SYST_TICKINT | SYST_CLKSOURCE_CPU;
    /* the counter reads 0 until its first reload: tth_cm_ticks counts from there */
    while (SYST_CVR == 0)
        ;

    for (void (**f)(void) = __init_array_start; f < __init_array_end; f++)
        (*f)();
    tth_cm_exit(main());
}

/* SysTick counts down on the processor clock from the reload value to 0 and reloads on the
 * next tick: a period of SYST_MAX + 1 ticks. Reaching 0 sets the interrupt pending; the handler
 * counts these. After the first reload (start() waits for it) at tick 0, tick t = n * period + j
 * reads SYST_MAX - j, and n of the 1 -> 0 transitions have happened, one more at j = SYST_MAX. */
static volatile uint32_t systick_wraps;

void SysTick_Handler(void)
{
    systick_wraps++;
}

uint64_t tth_cm_ticks(void)
{
    uint32_t w, p1, v, p2;
    /* a transition or the handler between the reads changes the pending bit or the count */
    do {
        w = systick_wraps;
        p1 = SCB_ICSR & ICSR_PENDSTSET;
        v = SYST_CVR;
        p2 = SCB_ICSR & ICSR_PENDSTSET;
    } while (w != systick_wraps || p1 != p2);
    uint64_t n = (uint64_t)w + (p1 ? 1u : 0u); /* transitions so far, one maybe not handled */
    uint64_t period = (uint64_t)SYST_MAX + 1u;
    return v == 0 ? n * period - 1u : n * period + (SYST_MAX - v);
}

uint32_t tth_cm_profile_clock(void)
{
    return (uint32_t)tth_cm_ticks();
}

size_t tth_cm_stack_size(void)
{
    return (size_t)((char *)__stack_top - (char *)__stack_limit);
}

size_t tth_cm_stack_used(void)
{
    const uint32_t *p = __stack_limit;
    while (p < __stack_top && *p == STACK_PAINT)
        p++;
    return (size_t)((const char *)__stack_top - (const char *)p);
}

int tth_cm_stack_overflowed(void);
int tth_cm_stack_overflowed(void)
{
    for (uint32_t i = 0; i < STACK_GUARD_WORDS; i++)
        if (__stack_limit[i] != STACK_PAINT)
            return 1;
    return 0;
}

/* Fault handlers. Each finds the frame the exception stacked (main or process stack, EXC_RETURN
 * bit 2), moves to a stack of its own (the fault may be a stack overflow: the main stack is then
 * at its limit) and reports. */
uint64_t tth_cm_fault_stack[256];

__attribute__((noreturn, used)) void tth_cm_fault(const uint32_t *frame, uint32_t exc_return);

#if TTH_CM_V8M
#define CLEAR_MSPLIM "movs r2, #0\n\tmsr msplim, r2\n\t"
#else
#define CLEAR_MSPLIM
#endif

#define FAULT_HANDLER(name)                                                                    \
    __attribute__((naked)) void name(void)                                                     \
    {                                                                                          \
        __asm__ volatile("tst lr, #4\n\t"                                                      \
                         "ite eq\n\t"                                                          \
                         "mrseq r0, msp\n\t"                                                   \
                         "mrsne r0, psp\n\t"                                                   \
                         "mov r1, lr\n\t" CLEAR_MSPLIM                                         \
                         "movw r2, #:lower16:tth_cm_fault_stack+2048\n\t"                      \
                         "movt r2, #:upper16:tth_cm_fault_stack+2048\n\t"                      \
                         "msr msp, r2\n\t"                                                     \
                         "isb\n\t"                                                             \
                         "b tth_cm_fault\n\t");                                                \
    }

FAULT_HANDLER(NMI_Handler)
FAULT_HANDLER(HardFault_Handler)
FAULT_HANDLER(MemManage_Handler)
FAULT_HANDLER(BusFault_Handler)
FAULT_HANDLER(UsageFault_Handler)
FAULT_HANDLER(SecureFault_Handler)
FAULT_HANDLER(Default_Handler)

static const char *const exception_names[16] = {
    "thread mode", "Reset", "NMI", "HardFault", "MemManage", "BusFault", "UsageFault",
    "SecureFault", "reserved exception 8", "reserved exception 9", "reserved exception 10",
    "SVCall", "DebugMonitor", "reserved exception 13", "PendSV", "SysTick",
};

/* CFSR: MemManage status (bits 0-7), BusFault status (8-15), UsageFault status (16-31) */
static const struct {
    uint32_t bit;
    const char *what;
} cfsr_bits[] = {
    { 1u << 0, "IACCVIOL: instruction access violation" },
    { 1u << 1, "DACCVIOL: data access violation" },
    { 1u << 3, "MUNSTKERR: MemManage on exception return unstacking" },
    { 1u << 4, "MSTKERR: MemManage on exception entry stacking" },
    { 1u << 5, "MLSPERR: MemManage in lazy FP state preservation" },
    { 1u << 8, "IBUSERR: bus error on instruction fetch" },
    { 1u << 9, "PRECISERR: precise data bus error" },
    { 1u << 10, "IMPRECISERR: imprecise data bus error" },
    { 1u << 11, "UNSTKERR: bus error on exception return unstacking" },
    { 1u << 12, "STKERR: bus error on exception entry stacking" },
    { 1u << 13, "LSPERR: bus error in lazy FP state preservation" },
    { 1u << 16, "UNDEFINSTR: undefined instruction" },
    { 1u << 17, "INVSTATE: invalid state (EPSR.T or IT)" },
    { 1u << 18, "INVPC: invalid EXC_RETURN or PC load" },
    { 1u << 19, "NOCP: coprocessor (FPU/MVE) access disabled or absent" },
    { 1u << 20, "STKOF: stack overflow (MSPLIM/PSPLIM)" },
    { 1u << 24, "UNALIGNED: unaligned access trapped" },
    { 1u << 25, "DIVBYZERO: integer division by zero" },
};

void tth_cm_fault(const uint32_t *frame, uint32_t exc_return)
{
    MPU_CTRL = 0; /* the frame may lie in the stack guard */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    ipsr &= 0x1FFu;
    uint32_t cfsr = SCB_CFSR, hfsr = SCB_HFSR;

    tth_cm_puts("TTH-FAULT ");
    if (ipsr < 16) {
        tth_cm_puts(exception_names[ipsr]);
        tth_cm_puts("\n");
    } else {
        tth_cm_put_dec("unexpected external interrupt ", ipsr - 16u);
    }
    for (size_t i = 0; i < sizeof cfsr_bits / sizeof cfsr_bits[0]; i++)
        if (cfsr & cfsr_bits[i].bit) {
            tth_cm_puts("  ");
            tth_cm_puts(cfsr_bits[i].what);
            tth_cm_puts("\n");
        }
    if (cfsr & ((1u << 4) | (1u << 12)))
        tth_cm_puts("  the exception frame could not be pushed: stack overflow (or a corrupt SP)\n");
    if (hfsr & (1u << 30))
        tth_cm_puts("  FORCED: a configurable fault escalated to HardFault\n");
    if (hfsr & (1u << 1))
        tth_cm_puts("  VECTTBL: bus fault reading the vector table\n");
    tth_cm_put_hex32("  CFSR  0x", cfsr);
    tth_cm_put_hex32("  HFSR  0x", hfsr);
    if (cfsr & (1u << 7)) {
        uint32_t a = SCB_MMFAR;
        tth_cm_put_hex32("  MMFAR 0x", a);
        if (a >= (uint32_t)(uintptr_t)__stack_guard && a < (uint32_t)(uintptr_t)__stack_limit)
            tth_cm_puts("  the address is in the guard below the stack: stack overflow\n");
        if (a >= (uint32_t)(uintptr_t)__rodata_mem_start && a < (uint32_t)(uintptr_t)__rodata_mem_end)
            tth_cm_puts("  the address is in the read-only memory of the constants and the "
                        "embedded inputs: a write to a constant or an input\n");
    }
    if (cfsr & (1u << 15))
        tth_cm_put_hex32("  BFAR  0x", SCB_BFAR);
#if TTH_CM_V8M
    if (ipsr == 7) {
        tth_cm_put_hex32("  SFSR  0x", SCB_SFSR);
        tth_cm_put_hex32("  SFAR  0x", SCB_SFAR);
    }
#endif
    tth_cm_put_hex32("  EXC_RETURN 0x", exc_return);
    /* the stacked r0-r3, r12, lr, pc, xPSR, if the frame lies in RAM */
    if ((const void *)frame >= (const void *)__ram_start &&
        (const void *)(frame + 8) <= (const void *)__ram_end) {
        tth_cm_put_hex32("  PC    0x", frame[6]);
        tth_cm_put_hex32("  LR    0x", frame[5]);
        tth_cm_put_hex32("  xPSR  0x", frame[7]);
    } else {
        tth_cm_put_hex32("  stack frame outside RAM at 0x", (uint32_t)(uintptr_t)frame);
    }
    tth_cm_exit(TTH_CM_EXIT_FAULT);
}
