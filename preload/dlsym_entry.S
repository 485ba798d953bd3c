/* SPDX-License-Identifier: MIT */
/* dlsym_entry.S - the interposer's dlsym.
 *
 * glibc's dlsym finds the calling object from its own return address: RTLD_NEXT means "the
 * objects after the caller", and RTLD_DEFAULT searches the caller's scope (its local group
 * too, for an object loaded RTLD_LOCAL).  A dlsym written in C that calls libc's loses that
 * address: the caller becomes the interposer.  So this entry asks acct_dlsym_filter(handle,
 * name) which function should answer, then jumps to it with the arguments and the return
 * address untouched: libc's dlsym for every lookup but those of hooked driver names, which
 * acct_dlsym_hooked answers (with our wrapper in place of the driver's function).
 *
 * Only x86-64 and AArch64 have this entry; elsewhere the interposer defines no dlsym and
 * sees runtime-resolved entry points only through cuGetProcAddress of its own exports. */

#if defined(__x86_64__)
    .text
    .globl  dlsym
    .type   dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    endbr64
    pushq   %rdi                    /* keep the arguments: handle, name */
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp                /* 16-byte alignment for the call */
    .cfi_adjust_cfa_offset 8
    call    acct_dlsym_filter       /* -> the function to answer, or NULL */
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    testq   %rax, %rax
    jz      1f
    jmp     *%rax                   /* our caller's return address is on the stack again */
1:
    xorl    %eax, %eax
    ret
    .cfi_endproc
    .size   dlsym, .-dlsym

#elif defined(__aarch64__)
    .text
    .globl  dlsym
    .type   dlsym, %function
    .p2align 2
dlsym:
    .cfi_startproc
    hint    #34                     /* BTI c */
    stp     x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    .cfi_offset x29, -32
    .cfi_offset x30, -24
    mov     x29, sp
    stp     x0, x1, [sp, #16]       /* keep the arguments: handle, name */
    bl      acct_dlsym_filter       /* -> the function to answer, or NULL */
    mov     x16, x0
    ldp     x0, x1, [sp, #16]
    ldp     x29, x30, [sp], #32     /* the caller's link register again */
    .cfi_def_cfa_offset 0
    .cfi_restore x29
    .cfi_restore x30
    cbz     x16, 1f
    br      x16
1:
    mov     x0, xzr
    ret
    .cfi_endproc
    .size   dlsym, .-dlsym
#endif

    .section .note.GNU-stack,"",%progbits
