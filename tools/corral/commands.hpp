// Subcommands of the `corral` command; each lives in its own file.
#pragma once
namespace corral::cli {
int cmd_sim(int argc, char** argv);      // cmd_sim.cpp: trace simulation
int cmd_compare(int argc, char** argv);  // cmd_compare.cpp: `corral sim compare`, policies side by side
int cmd_submit(int argc, char** argv);   // cmd_jobs.cpp: talk to corrald
int cmd_stat(int argc, char** argv);
int cmd_cancel(int argc, char** argv);
int cmd_wait(int argc, char** argv);
int cmd_node(int argc, char** argv);
int cmd_control(int argc, char** argv);  // suspend | resume | requeue | checkpoint JOBID
int cmd_report(int argc, char** argv);   // the weekly NCI charging report
int cmd_mesh(int argc, char** argv);     // cmd_mesh.cpp: the mesh as this node sees it
int cmd_hold(int argc, char** argv);     // cmd_operator.cpp: hold | release JOBID
int cmd_qmove(int argc, char** argv);    // qmove QUEUE JOBID
int cmd_drain(int argc, char** argv);    // drain NODE --reason TEXT | undrain NODE
int cmd_nodes(int argc, char** argv);    // every node of the mesh
int cmd_acct(int argc, char** argv);     // cmd_acct.cpp: ended jobs and runs (sacct)
int cmd_alloc(int argc, char** argv);    // cmd_alloc.cpp: the allocation calendar
int cmd_keygen(int argc, char** argv);
int cmd_exec(int argc, char** argv);     // cmd_exec.cpp: a process of the job on another of its nodes
int cmd_console(int argc, char** argv);  // cmd_console.cpp: the live terminal view (ncurses)   // cmd_keygen.cpp: a node's mesh key pair
}  // namespace corral::cli
