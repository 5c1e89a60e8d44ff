/* tests/windows/kl_ctrl.c — run a program on a console of its own and raise
 * console control events on it (what Ctrl-C in a console window does): the
 * Windows counterpart of `kill -INT` for keel's graceful-shutdown tests.
 *
 *   kl_ctrl run PROGRAM [ARGS...]
 *
 * makes a new console (AllocConsole), starts PROGRAM attached to it with
 * our stdout and stderr (stdin: NUL), prints PROGRAM's process id on
 * stdout, then reads commands from stdin, one a line:
 *
 *   c       GenerateConsoleCtrlEvent(CTRL_C_EVENT) on the console
 *   break   GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT) on the console
 *
 * and exits with PROGRAM's exit code once it ends. Each command is
 * acknowledged on stderr ("kl_ctrl: raised c", or why it failed).
 *
 * Why a console of its own: a console event reaches the processes attached
 * to one console, and under Wine a program started from Linux (pipes, no
 * terminal) has no console that events can be raised on; AttachConsole to
 * another process's console fails there too. Wine 8 implements CTRL_C_EVENT
 * only (CTRL_BREAK_EVENT fails with "not implemented"). On Windows this
 * works as is.
 *
 * Built with mingw-w64 by cmake/windows/build-and-test.sh (or by hand:
 * x86_64-w64-mingw32-gcc -o kl_ctrl.exe kl_ctrl.c -lshell32); used by
 * tests/windows/blackbox.py.
 */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <shellapi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* The events are for the program we run, not for us. A handler, unlike
 * SetConsoleCtrlHandler(NULL, TRUE), is not inherited by the program. */
static BOOL WINAPI ignore_event(DWORD event)
{
    (void)event;
    return TRUE;
}

/* Appends arg to cmd, quoted the way the C runtime splits it again. */
static void append_arg(wchar_t *cmd, size_t size, const wchar_t *arg)
{
    size_t n = wcslen(cmd);
    if (n && n + 1 < size)
        cmd[n++] = L' ';
    if (n + 1 < size)
        cmd[n++] = L'"';
    for (const wchar_t *p = arg;; p++) {
        size_t slashes = 0;
        while (*p == L'\\') {
            p++;
            slashes++;
        }
        /* Backslashes double before a quote, and before the closing one. */
        size_t times = (*p == L'"' || *p == L'\0') ? 2 : 1;
        for (size_t i = 0; i < slashes * times && n + 1 < size; i++)
            cmd[n++] = L'\\';
        if (*p == L'\0')
            break;
        if (*p == L'"' && n + 1 < size)
            cmd[n++] = L'\\';
        if (n + 1 < size)
            cmd[n++] = *p;
    }
    if (n + 1 < size)
        cmd[n++] = L'"';
    cmd[n] = L'\0';
}

/* Reads commands from stdin until EOF. */
static DWORD WINAPI command_loop(void *arg)
{
    (void)arg;
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        DWORD event;
        if (strcmp(line, "c") == 0)
            event = CTRL_C_EVENT;
        else if (strcmp(line, "break") == 0)
            event = CTRL_BREAK_EVENT;
        else {
            fprintf(stderr, "kl_ctrl: unknown command '%s' (c or break)\n", line);
            continue;
        }
        if (GenerateConsoleCtrlEvent(event, 0))
            fprintf(stderr, "kl_ctrl: raised %s\n", line);
        else
            fprintf(stderr, "kl_ctrl: cannot raise %s: GenerateConsoleCtrlEvent failed (%lu)\n",
                    line, GetLastError());
        fflush(stderr);
    }
    return 0;
}

static int run(int argc, wchar_t **argv)
{
    /* AllocConsole points our standard handles at the new console: keep
     * the ones we were given, for the program and for our own messages. */
    HANDLE in = GetStdHandle(STD_INPUT_HANDLE);
    HANDLE out = GetStdHandle(STD_OUTPUT_HANDLE);
    HANDLE err = GetStdHandle(STD_ERROR_HANDLE);
    FreeConsole();
    if (!AllocConsole())
        fprintf(stderr, "kl_ctrl: AllocConsole failed (%lu)\n", GetLastError());
    SetStdHandle(STD_INPUT_HANDLE, in);
    SetStdHandle(STD_OUTPUT_HANDLE, out);
    SetStdHandle(STD_ERROR_HANDLE, err);
    SetConsoleCtrlHandler(ignore_event, TRUE);

    static wchar_t cmd[32768];
    cmd[0] = L'\0';
    for (int i = 0; i < argc; i++)
        append_arg(cmd, sizeof cmd / sizeof cmd[0], argv[i]);

    SECURITY_ATTRIBUTES inherit = {sizeof inherit, NULL, TRUE};
    HANDLE nul = CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &inherit,
                             OPEN_EXISTING, 0, NULL);
    SetHandleInformation(out, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
    SetHandleInformation(err, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
    STARTUPINFOW si;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = nul; /* our stdin carries the commands */
    si.hStdOutput = out;
    si.hStdError = err;
    PROCESS_INFORMATION pi;
    if (!CreateProcessW(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
        fprintf(stderr, "kl_ctrl: cannot start %ls (%lu)\n", argv[0], GetLastError());
        return 126;
    }
    CloseHandle(pi.hThread);
    printf("%lu\n", (unsigned long)pi.dwProcessId);
    fflush(stdout);

    HANDLE reader = CreateThread(NULL, 0, command_loop, NULL, 0, NULL);
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(pi.hProcess, &code);
    CloseHandle(pi.hProcess);
    (void)reader; /* may still block in fgets: ExitProcess ends it */
    fflush(stdout);
    fflush(stderr);
    ExitProcess(code);
}

int main(void)
{
    int argc = 0;
    wchar_t **argv = CommandLineToArgvW(GetCommandLineW(), &argc);
    if (argv == NULL || argc < 3 || wcscmp(argv[1], L"run") != 0) {
        fprintf(stderr, "usage: kl_ctrl run PROGRAM [ARGS...]\n");
        return 2;
    }
    return run(argc - 2, argv + 2);
}
