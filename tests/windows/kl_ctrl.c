/* tests/windows/kl_ctrl.c — run a program on a console of its own and raise
 * console control events on it (what Ctrl-C in a console window does): the
 * Windows counterpart of `kill -INT` for keel's graceful-shutdown tests.
 *
 *   kl_ctrl run PROGRAM [ARGS...]
 *
 * makes a new console (AllocConsole), starts PROGRAM attached to it with
 * our stdout and stderr (stdin: NUL), says "kl_ctrl: pid N" (PROGRAM's
 * process id) on stderr, then reads commands from stdin, one a line:
 *
 *   c       GenerateConsoleCtrlEvent(CTRL_C_EVENT) on the console
 *   break   GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT) on the console
 *
 * Each command is acknowledged on stderr ("kl_ctrl: raised c", or why it
 * failed).
 *
 *   kl_ctrl exec PROGRAM [ARGS...]
 *
 * runs PROGRAM with our standard handles, on no console of its own, and
 * says its process id too (no commands).
 *
 * Our lines go to stderr, each prefixed "kl_ctrl: " and written whole, so
 * that they can be told from PROGRAM's own output on the same pipe; stdout
 * is PROGRAM's alone. Once PROGRAM has ended, our last line is
 *
 *   kl_ctrl: exit status N
 *
 * with PROGRAM's exit code as Windows reports it (GetExitCodeProcess), and
 * kl_ctrl exits with that code. Read the line, not kl_ctrl's own status,
 * when running under Wine: the wineserver SIGKILLs a Wine process whose
 * Unix side lingers about half a second after its Windows side ended
 * (server/process.c, the sigkill timer), which a loaded machine can make
 * happen; the parent then sees "killed", whatever the exit code was.
 *
 * Why a console of its own: a console event reaches the processes attached
 * to one console, and under Wine a program started from Linux (pipes, no
 * terminal) has no console that events can be raised on; AttachConsole to
 * another process's console fails there too. Wine 8 implements CTRL_C_EVENT
 * only (CTRL_BREAK_EVENT fails with "not implemented"). On Windows this
 * works as is.
 *
 * Built by tests/CMakeLists.txt (target kl_ctrl) on Windows builds; used by
 * tests/windows/blackbox.py.
 */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <shellapi.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* One line on stderr, "kl_ctrl: ..." and its line break, in a single
 * write: the program we run writes its own lines to the same pipe, and the
 * reader tells ours from its by that prefix. */
static void say(const char *fmt, ...)
{
    static const char prefix[] = "kl_ctrl: ";
    char line[512];
    memcpy(line, prefix, sizeof prefix - 1);
    size_t n = sizeof prefix - 1;
    size_t room = sizeof line - n - 1; /* one byte kept for the line break */
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, room, fmt, ap);
    va_end(ap);
    if (m > 0)
        n += (size_t)m < room ? (size_t)m : room - 1;
    line[n++] = '\n';
    DWORD written;
    WriteFile(GetStdHandle(STD_ERROR_HANDLE), line, (DWORD)n, &written, NULL);
}

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

/* Held while a command is carried out and acknowledged; the main thread
 * takes it for good before it reports the exit status, so that a command in
 * flight is acknowledged first (the program may end as soon as the event is
 * raised, before this thread gets to say so). */
static CRITICAL_SECTION command_lock;

/* Reads commands from stdin until EOF. */
static DWORD WINAPI command_loop(void *arg)
{
    (void)arg;
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        EnterCriticalSection(&command_lock);
        line[strcspn(line, "\r\n")] = '\0';
        DWORD event;
        if (strcmp(line, "c") == 0)
            event = CTRL_C_EVENT;
        else if (strcmp(line, "break") == 0)
            event = CTRL_BREAK_EVENT;
        else {
            say("unknown command '%s' (c or break)", line);
            LeaveCriticalSection(&command_lock);
            continue;
        }
        if (GenerateConsoleCtrlEvent(event, 0))
            say("raised %s", line);
        else
            say("cannot raise %s: GenerateConsoleCtrlEvent failed (%lu)", line, GetLastError());
        LeaveCriticalSection(&command_lock);
    }
    return 0;
}

static int run(int argc, wchar_t **argv, int console)
{
    HANDLE in = GetStdHandle(STD_INPUT_HANDLE);
    HANDLE out = GetStdHandle(STD_OUTPUT_HANDLE);
    HANDLE err = GetStdHandle(STD_ERROR_HANDLE);
    if (console) {
        /* AllocConsole points our standard handles at the new console:
         * keep the ones we were given, for the program and for our own
         * messages. */
        FreeConsole();
        BOOL allocated = AllocConsole();
        DWORD error = GetLastError();
        SetStdHandle(STD_INPUT_HANDLE, in);
        SetStdHandle(STD_OUTPUT_HANDLE, out);
        SetStdHandle(STD_ERROR_HANDLE, err);
        if (!allocated)
            say("AllocConsole failed (%lu)", error);
    }
    /* Events on our console are for the program, not for us; and a Ctrl-C
     * that reaches us another way (SIGINT to our Wine process) must not end
     * us before we have reported the program's status. */
    SetConsoleCtrlHandler(ignore_event, TRUE);
    /* "Ignore Ctrl-C" is inherited: a parent started in a process group of
     * its own (CREATE_NEW_PROCESS_GROUP, as CI runners and services often
     * start their jobs) would pass it down to the program, which would then
     * never see the event. Clear it for ourselves, hence for the child. */
    SetConsoleCtrlHandler(NULL, FALSE);

    static wchar_t cmd[32768];
    cmd[0] = L'\0';
    for (int i = 0; i < argc; i++)
        append_arg(cmd, sizeof cmd / sizeof cmd[0], argv[i]);

    /* With a console, our stdin carries the commands: the program reads NUL. */
    HANDLE child_in = in;
    if (console) {
        SECURITY_ATTRIBUTES inherit = {sizeof inherit, NULL, TRUE};
        child_in = CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &inherit,
                               OPEN_EXISTING, 0, NULL);
    }
    SetHandleInformation(child_in, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
    SetHandleInformation(out, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
    SetHandleInformation(err, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
    STARTUPINFOW si;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = child_in;
    si.hStdOutput = out;
    si.hStdError = err;
    PROCESS_INFORMATION pi;
    if (!CreateProcessW(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
        say("cannot start %ls (%lu)", argv[0], GetLastError());
        return 126;
    }
    CloseHandle(pi.hThread);
    say("pid %lu", (unsigned long)pi.dwProcessId);

    InitializeCriticalSection(&command_lock);
    if (console)
        CloseHandle(CreateThread(NULL, 0, command_loop, NULL, 0, NULL));
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 1;
    if (!GetExitCodeProcess(pi.hProcess, &code))
        say("GetExitCodeProcess failed (%lu)", GetLastError());
    CloseHandle(pi.hProcess);
    /* Not left again: the command thread may still block in fgets, and
     * ExitProcess ends it there. */
    EnterCriticalSection(&command_lock);
    say("exit status %lu", (unsigned long)code);
    ExitProcess(code);
}

int main(void)
{
    int argc = 0;
    wchar_t **argv = CommandLineToArgvW(GetCommandLineW(), &argc);
    int console = argv != NULL && argc >= 3 && wcscmp(argv[1], L"run") == 0;
    int plain = argv != NULL && argc >= 3 && wcscmp(argv[1], L"exec") == 0;
    if (!console && !plain) {
        fprintf(stderr, "usage: kl_ctrl run|exec PROGRAM [ARGS...]\n");
        return 2;
    }
    return run(argc - 2, argv + 2, console);
}
