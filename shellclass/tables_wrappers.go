package shellclass

// wrappers is read-only after package initialisation.
var wrappers = map[string]wrapper{
	"sudo":    {opts: "-A -b -E -H -i -k -K -l -n -P -S -s -v -e -B -N -u= -g= -h= -p= -r= -t= -C= -D= -R= -T= -U= --askpass --background --bell --edit --preserve-env? --set-home --login --remove-timestamp --reset-timestamp --list --non-interactive --preserve-groups --stdin --shell --validate --user= --group= --host= --prompt= --role= --type= --close-from= --chdir= --chroot= --command-timeout= --other-user=", shellOpts: []string{"-s", "-i", "--shell", "--login"}, writeOpts: []string{"-e", "--edit"}},
	"doas":    {opts: "-n -s -L -u= -C=", shellOpts: []string{"-s"}},
	"env":     {opts: "-0 -i -v -u= -C= -S= --null --ignore-environment --debug --unset= --chdir= --split-string= --block-signal? --default-signal? --ignore-signal? --list-signal-handling", assigns: true, stringOpts: []string{"-S", "--split-string"}},
	"nice":    {opts: "-n= -# --adjustment="},
	"ionice":  {opts: "-c= -n= -t --class= --classdata= --ignore", noCmdClass: Write, noCmdWhy: "ionice without a command changes another process"},
	"nohup":   {},
	"timeout": {opts: "-k= -s= -v -f -p --kill-after= --signal= --verbose --foreground --preserve-status", skip: 1},
	"stdbuf":  {opts: "-i= -o= -e= --input= --output= --error="},
	"time":    {opts: "-p -v -a -q -f= -o= --portability --verbose --append --quiet --format= --output=", writeOpts: []string{"-o", "--output"}},
	"command": {opts: "-p -v -V"},
	"builtin": {},
	"exec":    {opts: "-c -l -a="},
	"setsid":  {opts: "-c -f -w --ctty --fork --wait"},
	"flock":   {opts: "-s -x -u -n -o -F -E= -w= -c= --shared --exclusive --unlock --nonblock --nb --close --no-fork --timeout= --conflict-exit-code= --command= --verbose", skip: 1, own: Write, ownWhy: "flock creates its lock file", stringOpts: []string{"-c", "--command"}},
	"chroot":  {opts: "--userspec= --groups= --skip-chdir", skip: 1},
	"watch":   {opts: "-b -c -C -d? -e -g -n= -p -q= -r -t -w -x --beep --color --no-color --differences? --errexit --chgexit --equexit= --interval= --precise --no-rerun --no-title --no-wrap --exec", own: Write, ownWhy: "watch runs until interrupted", shellAlways: true, execOpt: "-x"},
	"xargs":   {opts: "-0 -a= -d= -E= -e? -I= -i? -L= -l? -n= -o -P= -p -r -s= -t -x --null --arg-file= --delimiter= --eof? --replace? --max-lines? --max-args= --open-tty --max-procs= --interactive --no-run-if-empty --max-chars= --verbose --exit --process-slot-var= --show-limits"},
	"busybox": {},
	"strace":  {opts: "-c -C -d -D -f -F -i -k -q -r -t -T -v -V -w -x -y -z -Z -a= -b= -e= -E= -I= -o= -O= -P= -s= -S= -u= -X= --summary-only --summary --follow-forks --output= --signal= --trace= --status= --string-limit= --decode-fds? --absolute-timestamps? --relative-timestamps? --syscall-times? --timestamps?", writeOpts: []string{"-o", "--output", "-p", "-e", "--inject", "--fault"}, noCmdClass: Write, noCmdWhy: "strace without a command attaches to a running process"},
	"runuser": {opts: "-f -l -m -p -P -c= -g= -G= -s= -u= -w= --command= --fast --group= --supp-group= --login --preserve-environment --pty --shell= --session-command= --user= --whitelist-environment=", stringOpts: []string{"-c", "--command", "--session-command"}},
	"su":      {opts: "-f -l -m -p -P -c= -g= -G= -s= -w= --command= --fast --group= --supp-group= --login --preserve-environment --pty --shell= --session-command= --whitelist-environment=", stringOpts: []string{"-c", "--command", "--session-command"}, noCmdClass: Write, noCmdWhy: "su without -c starts a shell that reads commands from standard input"},
}
