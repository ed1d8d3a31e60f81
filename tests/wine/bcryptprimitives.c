/* ProcessPrng for Wine 8, which lacks bcryptprimitives.dll.
 *
 * Rust's standard library (1.78 and later) draws random bytes from
 * ProcessPrng in bcryptprimitives.dll, present on every Windows since 10.
 * Debian 12's Wine 8.0 has no such DLL, so caseload.exe would not load
 * there. The Wine tests (tests/wine/run.sh) put this DLL beside the
 * executable, where Windows' loader looks first; on real Windows it is
 * not used or shipped. It draws from RtlGenRandom (advapi32's
 * SystemFunction036), which Wine implements.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, n))
            return FALSE;
        data += n;
        length -= n;
    }
    return TRUE;
}
