/* dplua.c: the `dplua` program, Lua 5.4's stand-alone interpreter with torch, nn and optim
 * loaded.  It keeps lua.c's shape: main hands everything to pmain under one lua_pcall, a
 * message handler adds the traceback, and the options -e -l -i -v -E -W - -- and LUA_INIT
 * behave as they do in `lua`.  The REPL adds line editing, history, tab completion of
 * globals, fields and methods, and Ctrl-C handling (at the prompt it clears the line; while
 * a statement runs it interrupts that statement).  The line editor is libedit (BSD) through
 * its readline-compatible interface, so the program stays under the MIT licence. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include <editline/readline.h>

#include "dplua.h"
#include "dplua_complete.h"
#include "../src/dp.h"

#ifndef DPLUA_VERSION
#define DPLUA_VERSION "0.1.0"
#endif

#define PROGNAME     "dplua"
#define PROMPT1      "> "
#define PROMPT2      ">> "
#define HISTORY_FILE ".dplua_history"
#define HISTORY_MAX  1000
#define EOFMARK      "<eof>"
#define MARKLEN      (sizeof(EOFMARK) / sizeof(char) - 1)

static const char *progname = PROGNAME;
static lua_State *globalL = NULL;
static int use_color = 0;   /* the REPL colours results and errors (see want_color) */

/* ------------------------------------------------------------------ messages */

static void l_message(const char *pname, const char *msg) {
    if (pname) fprintf(stderr, "%s: ", pname);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
}

/* Prints the error message on top of the stack (when status is not OK) and pops it. */
static int report(lua_State *L, int status) {
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        if (!msg) msg = "(error object is not a string)";
        if (use_color) msg = lua_pushfstring(L, "\033[31m%s\033[0m", msg);
        l_message(progname, msg);
        lua_settop(L, lua_gettop(L) - (use_color ? 2 : 1));
    }
    return status;
}

static void print_help(FILE *out) {
    fprintf(out,
            "usage: %s [options] [script [args]]\n"
            "Available options are:\n"
            "  -e stat         execute string 'stat'\n"
            "  -i              enter interactive mode after executing 'script'\n"
            "  -l mod          require library 'mod' into global 'mod'\n"
            "  -l g=mod        require library 'mod' into global 'g'\n"
            "  -v, --version   show version information and the backends built in\n"
            "  -h, --help      show this help\n"
            "  -E              ignore environment variables\n"
            "  -W              turn warnings on\n"
            "  --              stop handling options\n"
            "  -               stop handling options and execute stdin\n"
            "With no script and no -e, a terminal gets the REPL (torch, nn and optim loaded).\n",
            progname);
    fflush(out);
}

static void print_usage(const char *badoption) {
    fprintf(stderr, "%s: ", progname);
    if (badoption[1] == 'e' || badoption[1] == 'l')
        fprintf(stderr, "'%s' needs argument\n", badoption);
    else
        fprintf(stderr, "unrecognized option '%s'\n", badoption);
    print_help(stderr);
}

static void print_version(FILE *out) {
    fprintf(out, "dplua %s on %s\nbackends: cpu", DPLUA_VERSION, LUA_RELEASE);
    if (dp_device_type_built(DP_DEVICE_CUDA)) fprintf(out, ", cuda, nccl");
#ifdef DP_HAVE_MPI
    fprintf(out, ", mpi");
#endif
    fprintf(out, "\n");
    fflush(out);
}

/* ------------------------------------------------------------------ running chunks */

/* Hook set by the SIGINT handler: stops the running chunk with an error at the next
 * instruction, line, call or return. */
static void lstop(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

/* A signal handler may only set a hook (lua_sethook is safe to call from one); the
 * handler resets itself so that a second Ctrl-C, when Lua is stuck in C, ends the
 * program as it would without us. */
static void laction(int sig) {
    int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
    signal(sig, SIG_DFL);
    lua_sethook(globalL, lstop, flag, 1);
}

/* Message handler: adds a traceback to the error message. */
static int msghandler(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* Calls the function below its narg arguments with the message handler and the Ctrl-C
 * handler in place; restores the previous SIGINT disposition afterwards. */
static int docall(lua_State *L, int narg, int nres) {
    int base = lua_gettop(L) - narg;
    struct sigaction sa, old;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    globalL = L;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = laction;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    int status = lua_pcall(L, narg, nres, base);
    sigaction(SIGINT, &old, NULL);
    if (lua_gethook(L) == lstop) lua_sethook(L, NULL, 0, 0);   /* came too late to fire */
    lua_remove(L, base);
    return status;
}

static int dochunk(lua_State *L, int status) {
    if (status == LUA_OK) status = docall(L, 0, 0);
    return report(L, status);
}

static int dofile(lua_State *L, const char *name) {
    return dochunk(L, luaL_loadfile(L, name));
}

static int dostring(lua_State *L, const char *s, const char *name) {
    return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l: `mod` is required into global `mod`, `g=mod` into global `g`. */
static int dolibrary(lua_State *L, char *globname) {
    char *modname = strchr(globname, '=');
    if (modname == NULL) {
        modname = globname;
    } else {
        *modname = '\0';
        modname++;
    }
    lua_getglobal(L, "require");
    lua_pushstring(L, modname);
    int status = docall(L, 1, 1);
    if (status == LUA_OK) lua_setglobal(L, globname);
    return report(L, status);
}

/* Pushes the script's arguments (arg[1..n]) and returns their number. */
static int pushargs(lua_State *L) {
    if (lua_getglobal(L, "arg") != LUA_TTABLE)
        luaL_error(L, "'arg' is not a table");
    int n = (int)luaL_len(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    int i;
    for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
    lua_remove(L, -i);
    return n;
}

static int handle_script(lua_State *L, char **argv) {
    const char *fname = argv[0];
    if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
        fname = NULL;   /* stdin */
    int status = luaL_loadfile(L, fname);
    if (status == LUA_OK) {
        int n = pushargs(L);
        status = docall(L, n, LUA_MULTRET);
    }
    return report(L, status);
}

/* ------------------------------------------------------------------ arguments */

#define has_error 1   /* bad option */
#define has_i     2   /* -i */
#define has_v     4   /* -v */
#define has_e     8   /* -e */
#define has_E     16  /* -E */
#define has_h     32  /* -h, --help */

/* Scans the options.  *first is the index of the script (0 when there is none) or, on a
 * bad option, of that option. */
static int collectargs(char **argv, int *first) {
    int args = 0;
    int i;
    *first = 0;
    if (argv[0] == NULL) return 0;
    for (i = 1; argv[i] != NULL; i++) {
        *first = i;
        if (argv[i][0] != '-') return args;   /* the script */
        switch (argv[i][1]) {
        case '-':   /* "--", or a long option */
            if (strcmp(argv[i], "--version") == 0) { args |= has_v; break; }
            if (strcmp(argv[i], "--help") == 0) { args |= has_h; break; }
            if (argv[i][2] != '\0') return has_error;
            *first = argv[i + 1] != NULL ? i + 1 : 0;
            return args;
        case '\0':  /* "-": the script is stdin */
            return args;
        case 'E':
            if (argv[i][2] != '\0') return has_error;
            args |= has_E;
            break;
        case 'h':
            if (argv[i][2] != '\0') return has_error;
            args |= has_h;
            break;
        case 'W':
            if (argv[i][2] != '\0') return has_error;
            break;
        case 'i':
            args |= has_i;   /* -i implies -v */
            /* fallthrough */
        case 'v':
            if (argv[i][2] != '\0') return has_error;
            args |= has_v;
            break;
        case 'e':
            args |= has_e;
            /* fallthrough */
        case 'l':   /* both need an argument */
            if (argv[i][2] == '\0') {
                i++;
                if (argv[i] == NULL || argv[i][0] == '-') {
                    *first = i - 1;
                    return has_error;
                }
            }
            break;
        default:
            return has_error;
        }
    }
    *first = 0;
    return args;
}

/* Runs -e, -l and -W in order; returns 0 when one of them failed. */
static int runargs(lua_State *L, char **argv, int n) {
    for (int i = 1; i < n; i++) {
        int option = argv[i][1];
        switch (option) {
        case 'e':
        case 'l': {
            char *extra = argv[i] + 2;
            if (*extra == '\0') extra = argv[++i];
            int status = option == 'e' ? dostring(L, extra, "=(command line)")
                                       : dolibrary(L, extra);
            if (status != LUA_OK) return 0;
            break;
        }
        case 'W':
            lua_warning(L, "@on", 0);
            break;
        }
    }
    return 1;
}

/* arg[0] is the script, arg[1..] its arguments, arg[-1..] the program and its options,
 * as in lua.  Without a script, arg[0] is the program. */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
    int narg = argc - (script + 1);
    lua_createtable(L, narg > 0 ? narg : 0, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int handle_luainit(lua_State *L) {
    const char *name = "=LUA_INIT_5_4";
    const char *init = getenv(name + 1);
    if (init == NULL) {
        name = "=LUA_INIT";
        init = getenv(name + 1);
    }
    if (init == NULL) return LUA_OK;
    if (init[0] == '@') return dofile(L, init + 1);
    return dostring(L, init, name);
}

/* Loads dplua and sets the globals torch, nn, optim and help (torch.help). */
static int load_dplua(lua_State *L) {
    static const char *const globals[] = { "torch", "nn", "optim", NULL };
    lua_pushcfunction(L, luaopen_dplua);
    int status = docall(L, 0, 0);
    for (int i = 0; status == LUA_OK && globals[i]; i++) {
        lua_getglobal(L, "require");
        lua_pushstring(L, globals[i]);
        status = docall(L, 1, 1);
        if (status == LUA_OK) lua_setglobal(L, globals[i]);
    }
    if (status == LUA_OK && lua_getglobal(L, "torch") == LUA_TTABLE) {
        lua_getfield(L, -1, "help");
        lua_setglobal(L, "help");
    }
    if (status == LUA_OK) lua_pop(L, 1);
    return report(L, status);
}

/* ------------------------------------------------------------------ reading lines */

static int use_readline = 0;            /* stdin is a terminal */
static char *history_path = NULL;       /* NULL: history is not kept */
static volatile sig_atomic_t got_sigint = 0, got_sigwinch = 0;
static char *rl_result = NULL;
static int rl_finished = 0;

static void on_sigint(int sig) {
    (void)sig;
    got_sigint = 1;
}

static void on_sigwinch(int sig) {
    (void)sig;
    got_sigwinch = 1;
}

static void on_line(char *line) {
    rl_result = line;
    rl_finished = 1;
    rl_callback_handler_remove();
}

enum { LINE_OK, LINE_EOF, LINE_INTERRUPTED };

/* Reads one line with the line editor's callback interface, so that Ctrl-C at the prompt
 * only abandons the line: SIGINT (and SIGWINCH, for resizing) are blocked except while
 * waiting in pselect.  *line is malloc'd. */
static int readline_line(const char *prompt, char **line) {
    sigset_t block, orig;
    struct sigaction sa, old, sw, oldw;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    memset(&sw, 0, sizeof sw);
    sw.sa_handler = on_sigwinch;
    sigemptyset(&sw.sa_mask);
    sigaction(SIGWINCH, &sw, &oldw);
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGWINCH);
    sigprocmask(SIG_BLOCK, &block, &orig);
    got_sigint = 0;
    got_sigwinch = 0;
    rl_finished = 0;
    rl_result = NULL;
    rl_callback_handler_install(prompt, on_line);
    int result = LINE_OK;
    int fd = fileno(rl_instream ? rl_instream : stdin);
    while (!rl_finished) {
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(fd, &fds);
        int r = pselect(fd + 1, &fds, NULL, NULL, NULL, &orig);
        if (r < 0) {
            if (errno != EINTR) { rl_callback_handler_remove(); result = LINE_EOF; break; }
            if (got_sigint) {
                got_sigint = 0;
                FILE *out = rl_outstream ? rl_outstream : stdout;
                /* the abandoned line stays visible; removing the handler leaves libedit's
                 * editing mode, and installing it again starts an empty line */
                fputs("^C\n", out);
                fflush(out);
                rl_callback_handler_remove();
                result = LINE_INTERRUPTED;
                break;
            }
            if (got_sigwinch) {
                got_sigwinch = 0;
                rl_resize_terminal();
            }
            continue;
        }
        rl_callback_read_char();
    }
    sigprocmask(SIG_SETMASK, &orig, NULL);
    sigaction(SIGINT, &old, NULL);
    sigaction(SIGWINCH, &oldw, NULL);
    if (result != LINE_OK) return result;
    if (rl_result == NULL) return LINE_EOF;
    *line = rl_result;
    return LINE_OK;
}

/* Reads one line from stdin without readline (stdin is a pipe or a file); the prompt goes
 * to stderr so that stdout carries only what the statements print. */
static int plain_line(const char *prompt, char **line) {
    size_t cap = 0;
    char *buf = NULL;
    fputs(prompt, stderr);
    fflush(stderr);
    ssize_t n = getline(&buf, &cap, stdin);
    if (n < 0) {
        free(buf);
        return LINE_EOF;
    }
    if (n > 0 && buf[n - 1] == '\n') buf[--n] = '\0';
    if (n > 0 && buf[n - 1] == '\r') buf[--n] = '\0';
    *line = buf;
    return LINE_OK;
}

/* Pushes the prompt: the global _PROMPT or _PROMPT2 when set, as in lua. */
static const char *get_prompt(lua_State *L, int firstline) {
    if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
        lua_pop(L, 1);
        return lua_pushstring(L, firstline ? PROMPT1 : PROMPT2);
    }
    const char *p = luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    return p;
}

/* Pushes the next line (without its newline) as a string; returns a LINE_ code. */
static int pushline(lua_State *L, int firstline) {
    const char *prompt = get_prompt(L, firstline);
    char *line = NULL;
    int status = use_readline ? readline_line(prompt, &line) : plain_line(prompt, &line);
    lua_pop(L, 1);   /* the prompt */
    if (status != LINE_OK) return status;
    lua_pushstring(L, line);
    free(line);
    return LINE_OK;
}

/* Adds a statement to the history, and writes the history file at once, so that a
 * session ended by os.exit or a crash keeps it too.  (The whole file: libedit's
 * append_history(1, f) appends the last two entries.) */
static void saveline(const char *line) {
    if (use_readline && line[0] != '\0') {
        add_history(line);
        if (history_path) write_history(history_path);
    }
}

/* ------------------------------------------------------------------ the REPL */

/* A syntax error ending at <eof> means the statement is incomplete. */
static int incomplete(lua_State *L, int status) {
    if (status == LUA_ERRSYNTAX) {
        size_t lmsg;
        const char *msg = lua_tolstring(L, -1, &lmsg);
        if (lmsg >= MARKLEN && strcmp(msg + lmsg - MARKLEN, EOFMARK) == 0) {
            lua_pop(L, 1);
            return 1;
        }
    }
    return 0;
}

/* Tries the line on top of the stack as "return line": an expression to print. */
static int addreturn(lua_State *L) {
    const char *line = lua_tostring(L, -1);
    const char *retline = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
    if (status == LUA_OK) {
        lua_remove(L, -2);   /* the modified line */
        saveline(line);
    } else {
        lua_pop(L, 2);       /* the result from luaL_loadbuffer and the modified line */
    }
    return status;
}

/* Reads more lines while the statement is incomplete.  Returns the load status, or -1
 * when Ctrl-C abandoned the statement (nothing is left on the stack then). */
static int multiline(lua_State *L) {
    for (;;) {
        size_t len;
        const char *line = lua_tolstring(L, 1, &len);
        int status = luaL_loadbuffer(L, line, len, "=stdin");
        if (!incomplete(L, status)) {
            saveline(line);
            return status;
        }
        int r = pushline(L, 0);
        if (r == LINE_INTERRUPTED) {
            lua_settop(L, 0);
            return -1;
        }
        if (r == LINE_EOF) {
            /* report the statement as the syntax error it is */
            saveline(line);
            return luaL_loadbuffer(L, line, len, "=stdin");
        }
        lua_pushliteral(L, "\n");
        lua_insert(L, -2);
        lua_concat(L, 3);
    }
}

/* A statement typed at the prompt that starts with `local` declares a global instead
 * (`local function f` a global function), so the value lasts to the next line as it
 * would in a script; `local x <close>`-style attributes are left to Lua. */
static void keep_locals(lua_State *L) {
    const char *line = lua_tostring(L, 1);
    const char *p = line + strspn(line, " \t");
    if (strncmp(p, "local", 5) != 0 || !(p[5] == ' ' || p[5] == '\t') || strchr(p, '<')) return;
    p += 5;
    p += strspn(p, " \t");
    lua_pushstring(L, p);
    lua_replace(L, 1);
}

/* A line `?torch.randn` (the line at index 1 starts with '?') asks for help: it becomes
 * torch.help('torch.randn'), or torch.help(expr) when what follows the '?' is not a plain
 * name (?x[1]).  Returns the load status with the chunk (or the message) replacing the
 * line. */
static int help_line(lua_State *L) {
    const char *line = lua_tostring(L, 1);
    const char *p = line + strspn(line, " \t") + 1;
    p += strspn(p, " \t");
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == ';')) n--;
    size_t name = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, n == 0 ? "torch.help(" : name >= n ? "torch.help('" : "torch.help(");
    luaL_addlstring(&b, p, n);
    luaL_addstring(&b, n > 0 && name >= n ? "')" : ")");
    luaL_pushresult(&b);
    saveline(line);
    size_t len;
    const char *code = lua_tolstring(L, -1, &len);
    int status = luaL_loadbuffer(L, code, len, "=stdin");
    lua_remove(L, -2);   /* the code */
    lua_remove(L, 1);    /* the line */
    return status;
}

/* Reads a statement and compiles it; returns the load status with the function (or the
 * message) on the stack, -1 at end of input, -2 when Ctrl-C abandoned the line. */
static int loadline(lua_State *L) {
    lua_settop(L, 0);
    int r = pushline(L, 1);
    if (r == LINE_EOF) return -1;
    if (r == LINE_INTERRUPTED) return -2;
    {
        const char *line = lua_tostring(L, 1);
        if (line[strspn(line, " \t")] == '?') return help_line(L);
    }
    keep_locals(L);
    int status = addreturn(L);
    if (status != LUA_OK) {
        status = multiline(L);
        if (status == -1) return -2;
    }
    lua_remove(L, 1);   /* the line */
    return status;
}

/* The REPL's printer: torch.repl's show (tables as tables, the first result kept in `_`),
 * or the global print when that cannot be loaded. */
static void push_printer(lua_State *L) {
    lua_getglobal(L, "require");
    lua_pushliteral(L, "torch.repl");
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
        lua_pushboolean(L, use_color);
        lua_setfield(L, -2, "color");
        lua_getfield(L, -1, "show");
        lua_remove(L, -2);
        if (lua_isfunction(L, -1)) return;
    }
    lua_pop(L, 1);
    lua_getglobal(L, "print");
}

/* Prints the values on the stack (tensors through __tostring). */
static void l_print(lua_State *L) {
    int n = lua_gettop(L);
    if (n > 0) {
        luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
        push_printer(L);
        lua_insert(L, 1);
        if (docall(L, n, 0) != LUA_OK)   /* printing a large value can be interrupted too */
            l_message(progname, lua_pushfstring(L, "error calling 'print' (%s)",
                                                lua_tostring(L, -1)));
    }
}

static void init_history(void) {
    const char *env = getenv("DPLUA_HISTORY");
    if (env != NULL) {
        if (env[0] == '\0') return;   /* disabled */
        history_path = strdup(env);
    } else {
        const char *home = getenv("HOME");
        if (home == NULL || home[0] == '\0') return;
        size_t n = strlen(home) + sizeof(HISTORY_FILE) + 2;
        history_path = malloc(n);
        if (history_path) snprintf(history_path, n, "%s/%s", home, HISTORY_FILE);
    }
    if (history_path) {
        /* libedit's history file encodes newlines, so a multi-line statement comes back
         * as one entry */
        stifle_history(HISTORY_MAX);
        if (read_history(history_path) != 0 && write_history(history_path) != 0) {
            free(history_path);   /* cannot create it: keep no history */
            history_path = NULL;
        }
    }
}

static void save_history(void) {
    if (history_path) {
        history_truncate_file(history_path, HISTORY_MAX);
        free(history_path);
        history_path = NULL;
    }
}

/* Colour on a terminal: stdout is one, NO_COLOR is unset or empty and TERM is not dumb;
 * DPLUA_COLOR=1 (or 0) says yes (or no) whatever the rest. */
static int want_color(void) {
    const char *force = getenv("DPLUA_COLOR");
    if (force && force[0] != '\0') return strcmp(force, "0") != 0;
    const char *no = getenv("NO_COLOR");
    if (no && no[0] != '\0') return 0;
    const char *term = getenv("TERM");
    if (term && strcmp(term, "dumb") == 0) return 0;
    return isatty(STDOUT_FILENO);
}

static void doREPL(lua_State *L) {
    int status;
    struct sigaction sa, oldsa;
    const char *oldprogname = progname;
    progname = NULL;   /* errors in the REPL are printed without the program name */
    use_readline = isatty(STDIN_FILENO);
    use_color = want_color();
    if (use_readline) {
        rl_readline_name = PROGNAME;   /* for ~/.editrc */
        rl_catch_signals = 0;   /* SIGINT is ours (see readline_line) */
        rl_attempted_completion_function = repl_complete;
        static char word_breaks[] = " \t\n\"'`@$><=;|&{(}),[]+-*/%^~#";
        rl_basic_word_break_characters = word_breaks;
        rl_completer_word_break_characters = word_breaks;
        rl_initialize();
        init_history();
        /* between statements (compiling, printing) Ctrl-C is noted, not fatal */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &oldsa);
    }
    globalL = L;
    repl_completion_state(L);
    while ((status = loadline(L)) != -1) {
        if (status == -2) continue;   /* Ctrl-C at the prompt */
        if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK)
            l_print(L);
        else
            report(L, status);
    }
    lua_settop(L, 0);
    use_color = 0;
    if (use_readline) {
        fputs("\n", stdout);
        fflush(stdout);
        save_history();
        repl_completion_state(NULL);   /* frees what completion kept */
        sigaction(SIGINT, &oldsa, NULL);
    } else {
        fputs("\n", stderr);
    }
    progname = oldprogname;
}

/* ------------------------------------------------------------------ main */

static int pmain(lua_State *L) {
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    int script;
    int args = collectargs(argv, &script);
    int optlim = script > 0 ? script : argc;
    luaL_checkversion(L);
    if (args == has_error) {
        print_usage(argv[script]);
        return 0;
    }
    if (args & has_h) {
        print_help(stdout);
        lua_pushboolean(L, 1);
        return 1;
    }
    if (args & has_v)   /* with -i on a pipe the banner stays off stdout, as the prompts do */
        print_version((args & has_i) && !isatty(STDIN_FILENO) ? stderr : stdout);
    if (args & has_E) {
        lua_pushboolean(L, 1);   /* libraries ignore LUA_PATH and friends */
        lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
    }
    luaL_openlibs(L);
    createargtable(L, argv, argc, script);
    if (load_dplua(L) != LUA_OK) return 0;
    if (!(args & has_E) && handle_luainit(L) != LUA_OK) return 0;
    if (!runargs(L, argv, optlim)) return 0;
    if (script > 0 && handle_script(L, argv + script) != LUA_OK) return 0;
    if (args & has_i) {
        doREPL(L);
    } else if (script < 1 && !(args & (has_e | has_v))) {
        if (isatty(STDIN_FILENO)) {   /* a terminal: the REPL */
            print_version(stdout);
            doREPL(L);
        } else {
            dofile(L, NULL);   /* runs stdin as a file */
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

int main(int argc, char **argv) {
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        l_message(progname, "cannot create state: not enough memory");
        return EXIT_FAILURE;
    }
    lua_pushcfunction(L, pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    int status = lua_pcall(L, 2, 1, 0);
    int result = lua_toboolean(L, -1);
    report(L, status);
    lua_close(L);
    return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
